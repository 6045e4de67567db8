"""TFT plug-in: the model, its data and its metric (see deploybench.plugins).

Follows DeepLearningExamples' PyTorch TFT (electricity and traffic): the network
(`net`), the preprocessed binary dataset (`data`), the Triton wrapper and
dataloader of its `triton/` folder, and the q-risk of its `criterions.qrisk`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch

from ...plugins import read_torch_file
from . import data
from .net import TFTWrapper, tft_config

# Config entries of a DLE checkpoint that must equal the hparams: they shape the network
# or its output but not all of them show in the state_dict (encoder_length, n_head).
_CHECKED_CONFIG = ("hidden_size", "n_head", "example_length", "encoder_length", "quantiles",
                   "static_categorical_inp_lens", "temporal_known_categorical_inp_lens",
                   "temporal_observed_categorical_inp_lens", "static_continuous_inp_size",
                   "temporal_known_continuous_inp_size", "temporal_observed_continuous_inp_size",
                   "temporal_target_size")


class _Stub:
    """Stands in for the classes a DLE checkpoint pickles besides tensors (its config,
    FeatureSpec, the input and data type enums), so it loads without DLE's modules and
    without running anything; keeps their attributes, so the config can be compared with
    the hparams."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        if isinstance(state, tuple):  # (dict state, slots state)
            state = state[0]
        if isinstance(state, dict):
            self.__dict__.update(state)


# DLE's train.py saves {'args': argparse.Namespace, 'config': a configuration class,
# 'model': state_dict}; the config holds FeatureSpec namedtuples of its data_utils enums.
_DLE_CLASSES = {name: _Stub for name in (
    "configuration.ElectricityConfig", "configuration.TrafficConfig",
    "configuration.VolatilityConfig", "configuration.FavoritaConfig",
    "data_utils.FeatureSpec", "data_utils.InputTypes", "data_utils.DataTypes")}
_DLE_CLASSES["argparse.Namespace"] = argparse.Namespace


def read_checkpoint(checkpoint: str) -> tuple[dict, object | None]:
    """(state_dict, config or None) of a DLE checkpoint: `checkpoint.pt` as its train.py
    saves it ({'args', 'config', 'model'}), or a folder holding one (as DLE's triton
    scripts take it); a bare state_dict is accepted too. Read weights-only: tensors,
    plain values and DLE's config classes (as attribute holders), nothing else."""
    path = Path(checkpoint)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.is_file():
        raise FileNotFoundError(f"TFT checkpoint '{path}' does not exist")
    ckpt = read_torch_file(path, "TFT", _DLE_CLASSES)
    if not isinstance(ckpt, dict):
        raise ValueError(f"TFT checkpoint '{path}' holds a {type(ckpt).__name__}, not a dict")
    state = ckpt.get("model", ckpt)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise ValueError(f"TFT checkpoint '{path}' holds no state_dict under 'model'")
    config = ckpt.get("config")
    config = getattr(config, "model", config)  # DLE's model accepts config.model too
    # Later DLE versions keep the network's back half in a scripted `TFTpart2`; a
    # DistributedDataParallel state_dict has `module.` in front of every key.
    renamed = {}
    for key, value in state.items():
        key = key.removeprefix("module.").replace("TFTpart2.", "")
        renamed[key] = value
    return renamed, config


def _check_config(config: object, hparams: dict, path: str) -> None:
    def same(a, b) -> bool:
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, float) and isinstance(b, (int, float)):
            return math.isclose(a, b)  # quantiles
        return a == b

    stored = getattr(config, "__dict__", {})
    wrong = [f"{key}: checkpoint {stored[key]!r}, hparams {hparams[key]!r}"
             for key in _CHECKED_CONFIG
             if key in stored and key in hparams and not same(stored[key], hparams[key])]
    if wrong:
        raise ValueError(f"TFT checkpoint '{path}' was trained with another configuration: "
                         + "; ".join(wrong))


def build_model(hparams: dict, checkpoint: str | None, seed: int) -> torch.nn.Module:
    """The Triton-facing TFT (eval, FP32, CPU): DLE checkpoint weights, or a seeded
    initialisation when `checkpoint` is None."""
    torch.manual_seed(seed)
    model = TFTWrapper(tft_config(hparams))
    if checkpoint is not None:
        state, config = read_checkpoint(checkpoint)
        if config is not None:
            _check_config(config, hparams, checkpoint)
        try:
            model.model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"TFT checkpoint '{checkpoint}' does not fit the configured "
                             f"hparams: {err}") from None
    return model.float().eval()


def generate_dataset(hparams: dict, out_dir: str, seed: int, n_ids: int,
                     n_timesteps: int) -> None:
    """A synthetic electricity-like dataset in DLE's binary format; every split holds
    `n_timesteps` hours of each of `n_ids` series."""
    data.generate(out_dir, hparams, n_ids, n_timesteps, seed)


def load_split(hparams: dict, data_dir: str, split: str,
               max_samples: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The first `max_samples` examples of the split (all when None) as the Triton
    model's eight inputs, and the forecast targets [N, horizon, 1]. Absent feature
    groups are [N, 1] ones, as DLE's triton/dataloader.py sends them (there float64;
    here the group's dtype, int64 or float32, as the Triton config declares them)."""
    arrays = data.load(data_dir, split, hparams, max_samples)
    n = len(arrays[6])
    inputs = []
    for array, (_, dtype) in zip(arrays, data.FEAT_ORDER):
        if array is None:
            array = np.ones((n, 1), dtype=np.int64 if dtype == "CATEGORICAL" else np.float32)
        inputs.append(array)
    future = np.ascontiguousarray(arrays[6][:, hparams["encoder_length"]:, :1])
    return inputs, [future]


def evaluate(hparams: dict, predictions: list[np.ndarray],
             targets: list[np.ndarray]) -> dict[str, float]:
    """DLE's normalised quantile risk per quantile (criterions.qrisk):
    2 * mean(quantile loss) / mean(|target|), over all examples and horizons.

    DLE first unscales predictions and targets with the per-series scalers of
    `tgt_scalers.bin`; this gets neither ids nor scalers, so it scores the standardised
    values, on which the risk differs from DLE's published numbers."""
    pred = np.asarray(predictions[0], dtype=np.float64)
    tgt = np.asarray(targets[0], dtype=np.float64)
    quantiles = np.asarray(hparams["quantiles"], dtype=np.float64)
    if pred.shape[:-1] != tgt.shape[:-1] or pred.shape[-1] != len(quantiles):
        raise ValueError(f"predictions {list(pred.shape)} do not fit targets "
                         f"{list(tgt.shape)} and {len(quantiles)} quantiles")
    diff = pred - tgt  # [N, horizon, Q] - [N, horizon, 1]
    loss = (1 - quantiles) * np.clip(diff, 0, None) + quantiles * np.clip(-diff, 0, None)
    risk = 2 * loss.reshape(-1, len(quantiles)).mean(axis=0) / np.abs(tgt).mean()
    return {f"p{round(q * 100)}_risk": float(r) for q, r in zip(quantiles, risk)}
