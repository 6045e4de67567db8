"""Wide & Deep (Outbrain) plug-in (TensorFlow 2, Keras 3): the model, its data and its
metric.

Follows DeepLearningExamples' TensorFlow2/Recommendation/WideAndDeep as its Triton
deployment serves it (reference 000: a TensorFlow SavedModel `WidenDeep`, output
`wide_deep_model`): the network is in `net`, the data in `data` (DLE's preprocessed
parquet, see there), the metric is DLE's MAP@12.

Model interface (the config's inputs and outputs, in this order):
  inputs:  one tensor per feature: the categorical features (INT32 ids, DLE's inputs;
           [1] one-hot, [hotness] multi-hot, short lists padded with -1) in
           `hparams["categorical_features"]` order, then the numerical features (FP32
           [1]) in `hparams["numerical_features"]` order
  outputs: the click probability FP32 [1] (sigmoid of wide + deep logits)
`build_model` returns a built Keras model called as `model([feature_0, feature_1, ...])`.
"""

from __future__ import annotations

import numpy as np

from ...plugins import seeded_keras
from . import data
from .features import categorical, hotness, numerical, table_sizes

FRAMEWORK = "tensorflow"


def build_model(hparams: dict, checkpoint: str | None, seed: int):
    """The Keras model with seeded initial weights (same seed: same weights), or the
    weights of a Keras weights file (`model.save_weights`, `*.weights.h5`)."""
    from .net import build

    example = ([np.zeros((1, h), np.int32) for h in hotness(hparams)]
               + [np.zeros((1, 1), np.float32) for _ in numerical(hparams)])
    return seeded_keras(build, hparams, seed, example, checkpoint, "Wide & Deep")


def generate_dataset(hparams: dict, out_dir: str, seed: int, n_train: int = 4096,
                     n_valid: int = 4096) -> None:
    """A synthetic Outbrain-like dataset (see `data`): ids within the model's
    (scaled) table sizes, which become the feature spec's cardinalities."""
    features = [data.Categorical(f["name"], n, f["hotness"])
                for f, n in zip(categorical(hparams), table_sizes(hparams))]
    data.generate(out_dir, features, numerical(hparams),
                  {"train": n_train, "valid": n_valid}, seed)


def load_split(hparams: dict, data_dir: str, split: str,
               max_samples: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """([each categorical feature int32 [N, hotness], ..., each numerical float32
    [N, 1]], [clicked float32 [N, 1], display_id int64 [N, 1]]) of the first
    `max_samples` samples (all when None). Ids are passed as stored (the model reduces
    them modulo its table sizes); multi-hot lists are cut or padded with -1 to their
    hotness, as DLE's triton/tf_dataloader.py feeds them."""
    arrays = data.load(data_dir, split, max_samples)
    cats = categorical(hparams)
    cat_names = [f["name"] for f in cats]
    num_names = numerical(hparams)
    missing = [n for n in [*cat_names, *num_names, data.LABEL,
                           data.DISPLAY_ID] if n not in arrays]
    if missing:
        raise ValueError(f"Outbrain dataset '{data_dir}' split '{split}' lacks the "
                         f"features {', '.join(missing)}")
    inputs = ([data.padded(arrays[f["name"]], f["hotness"]) for f in cats]
              + [arrays[n].astype(np.float32).reshape(-1, 1) for n in num_names])
    targets = [arrays[data.LABEL].astype(np.float32).reshape(-1, 1),
               arrays[data.DISPLAY_ID].astype(np.int64).reshape(-1, 1)]
    return inputs, targets


def map_at_k(display_ids: np.ndarray, labels: np.ndarray, scores: np.ndarray,
             k: int = 12) -> float:
    """Mean average precision at k with one click per display, as DLE's WideAndDeep
    evaluation computes it: samples grouped by display id; displays without a click are
    left out; per display the clicked ad (the first one if several) scores 1 / rank when
    it is among the k ads of highest predicted probability, else 0 (ties: the ad that
    comes first in the data ranks higher, as top_k does); the mean over displays."""
    display_ids = np.asarray(display_ids).reshape(-1)
    labels = np.asarray(labels).reshape(-1) > 0.5
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not (len(display_ids) == len(labels) == len(scores)):
        raise ValueError(f"{len(scores)} predictions, {len(labels)} labels and "
                         f"{len(display_ids)} display ids")
    order = np.argsort(display_ids, kind="stable")
    ids, labels, scores = display_ids[order], labels[order], scores[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ids)) + 1] if len(ids) else np.array([], int)
    ends = np.r_[starts[1:], len(ids)]
    total, count = 0.0, 0
    for s, e in zip(starts, ends):
        clicked = np.flatnonzero(labels[s:e])
        if not len(clicked):
            continue
        c = clicked[0]
        group = scores[s:e]
        # 0-based rank: ads scored higher, and those tied but earlier
        rank = int((group > group[c]).sum() + (group[:c] == group[c]).sum())
        total += 1.0 / (rank + 1) if rank < k else 0.0
        count += 1
    return total / count if count else float("nan")


def evaluate(hparams: dict, predictions: list[np.ndarray],
             targets: list[np.ndarray]) -> dict[str, float]:
    """MAP@12 (DLE's metric, a fraction in [0, 1]) of the click probabilities."""
    prob = np.asarray(predictions[0]).reshape(-1)
    label, display = targets[0], targets[1]
    if prob.size != np.asarray(label).size:
        raise ValueError(f"{prob.size} predictions for {np.asarray(label).size} labels")
    return {"map_at_12": map_at_k(display, label, prob, 12)}
