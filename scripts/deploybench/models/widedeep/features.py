"""The features' layout from the hparams (categorical, with hotness and table size;
numerical), without Keras: the data steps need it, not the network (`net`), whose
import costs TensorFlow's."""

from __future__ import annotations


def categorical(hparams: dict) -> list[dict]:
    """The categorical features ({name, cardinality, embedding_dim, hotness}) in input
    order; `hotness` (ids per sample, DLE's MULTIHOT_COLUMNS) is 1 for a one-hot one."""
    return [{"hotness": 1, **f} for f in hparams["categorical_features"]]


def hotness(hparams: dict) -> list[int]:
    return [int(f["hotness"]) for f in categorical(hparams)]


def numerical(hparams: dict) -> list[str]:
    return [str(n) for n in hparams["numerical_features"]]


def table_sizes(hparams: dict) -> list[int]:
    """Rows per table: each feature's cardinality capped at `max_table_size` (null: the
    full cardinality)."""
    cap = hparams.get("max_table_size")
    sizes = [int(f["cardinality"]) if cap is None else min(int(f["cardinality"]), int(cap))
             for f in categorical(hparams)]
    if any(n < 1 for n in sizes):
        raise ValueError(f"embedding table sizes must be positive, got {sizes}")
    return sizes
