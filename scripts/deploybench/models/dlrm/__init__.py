"""DLRM / DCNv2 plug-in (TensorFlow 2, Keras 3): the model, its data and its metric.

Follows DeepLearningExamples' TensorFlow2/Recommendation/DLRM_and_DCNv2 as its Triton
deployment serves it (reference 003: Merlin HPS + TensorRT ensemble): `hparams["architecture"]`
picks "dlrm" (dot interaction) or "dcnv2" (low-rank cross network); the network is in
`net` (sparse part and dense part as separate layers), the data in `data`
(DLE's split binary Criteo layout), the metric is DLE's ROC AUC.

Model interface (the config's inputs and outputs, in this order):
  inputs:  numerical_features FP32 [13], categorical_features INT32 [26] (DLE's id type)
  outputs: the click probability FP32 [1] (sigmoid of the logit)
`build_model` returns a built Keras model called as `model([numerical, categorical])`;
`split` gives its embedding tables and dense part for the sparse/dense ensemble.
"""

from __future__ import annotations

import numpy as np

from ...plugins import seeded_keras
from . import data
from .features import table_sizes

FRAMEWORK = "tensorflow"


def build_model(hparams: dict, checkpoint: str | None, seed: int):
    """The Keras model with seeded initial weights (same seed: same weights), or the
    weights of a Keras weights file (`model.save_weights`, `*.weights.h5`)."""
    from .net import build

    example = [np.zeros((1, int(hparams["num_numerical_features"])), np.float32),
               np.zeros((1, len(table_sizes(hparams))), data.ID_DTYPE)]
    return seeded_keras(build, hparams, seed, example, checkpoint,
                        f"DLRM ({hparams.get('architecture', 'dlrm')})")


def split(model) -> tuple[list[np.ndarray], object]:
    """The model as its ensemble deploys it (reference 003): the embedding tables (float32
    [rows, dim] each, in feature order) and the dense part as a Keras model called as
    `dense([numerical [B, 13], lookup vectors [B, T * dim]])` -> the click probability."""
    from .net import DenseModel

    tables = [np.asarray(t.numpy(), dtype=np.float32) for t in model.sparse.tables]
    return tables, DenseModel(model.dense_part)


def generate_dataset(hparams: dict, out_dir: str, seed: int, n_train: int = 4096,
                     n_test: int = 4096) -> None:
    """A synthetic Criteo-like dataset in DLE's split binary layout: ids within the
    model's (scaled) table sizes, which become the feature spec's cardinalities."""
    data.generate(out_dir, int(hparams["num_numerical_features"]), table_sizes(hparams),
                         {"train": n_train, "test": n_test}, seed)


def load_split(hparams: dict, data_dir: str, split: str,
               max_samples: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """([numerical float32 [N, 13], categorical int32 [N, 26]], [label float32 [N, 1]])
    of the first `max_samples` samples (all when None). Ids are passed as stored: the
    model reduces them modulo its table sizes."""
    label, numerical, ids, _ = data.load(data_dir, split, max_samples)
    n_num, n_cat = int(hparams["num_numerical_features"]), len(table_sizes(hparams))
    if numerical.shape[1] != n_num or ids.shape[1] != n_cat:
        raise ValueError(f"Criteo dataset '{data_dir}' has {numerical.shape[1]} numerical and "
                         f"{ids.shape[1]} categorical features; the model takes {n_num} "
                         f"and {n_cat}")
    return ([numerical.astype(np.float32), ids],
            [label.astype(np.float32).reshape(-1, 1)])


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC as the Mann-Whitney statistic with average ranks (ties count one half);
    NaN when only one class is present."""
    labels = np.asarray(labels).reshape(-1) > 0.5
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    # average rank (1-based) of each group of tied scores
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], len(scores)]
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def evaluate(hparams: dict, predictions: list[np.ndarray],
             targets: list[np.ndarray]) -> dict[str, float]:
    """ROC AUC (DLE's metric) and the log loss of the click probabilities."""
    prob = np.asarray(predictions[0], dtype=np.float64).reshape(-1)
    label = np.asarray(targets[0], dtype=np.float64).reshape(-1)
    if prob.shape != label.shape:
        raise ValueError(f"{prob.size} predictions for {label.size} labels")
    eps = 1e-7
    p = np.clip(prob, eps, 1 - eps)
    log_loss = -np.mean(label * np.log(p) + (1 - label) * np.log(1 - p))
    return {"auc": roc_auc(label, prob), "log_loss": float(log_loss)}
