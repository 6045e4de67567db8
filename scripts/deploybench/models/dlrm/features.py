"""The embedding tables' sizes from the hparams, without Keras: the data steps need
them, not the network (`net`), whose import costs TensorFlow's."""

from __future__ import annotations


def table_sizes(hparams: dict) -> list[int]:
    """Rows per embedding table: `table_sizes` if given, else each of `cardinalities`
    capped at `max_table_size` (null: the full cardinality)."""
    if hparams.get("table_sizes"):
        sizes = [int(n) for n in hparams["table_sizes"]]
    else:
        cap = hparams.get("max_table_size")
        sizes = [int(n) if cap is None else min(int(n), int(cap))
                 for n in hparams["cardinalities"]]
    if any(n < 1 for n in sizes):
        raise ValueError(f"embedding table sizes must be positive, got {sizes}")
    return sizes
