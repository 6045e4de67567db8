"""TFT plug-in: the model, its data and its metric (see deploybench.plugins)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from . import tft_data
from .tft_net import TritonTFT, tft_config


class _Anything:
    """Stands in for DeepLearningExamples classes pickled inside a checkpoint (its
    config object), so that a checkpoint loads without that repository installed."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {})


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith(("torch", "collections", "numpy", "builtins", "_codecs")):
            return super().find_class(module, name)
        return _Anything


class _PickleModule:
    Unpickler = _Unpickler
    load = pickle.load


def _state_dict(checkpoint: str) -> dict:
    path = Path(checkpoint)
    if path.is_dir():
        path = path / "checkpoint.pt"  # the seeds' CHECKPOINT_DIR layout
    if not path.is_file():
        raise FileNotFoundError(f"TFT checkpoint '{path}' does not exist")
    ckpt = torch.load(path, map_location="cpu", weights_only=False, pickle_module=_PickleModule)
    state = ckpt.get("model", ckpt) if isinstance(ckpt, dict) else None
    if not isinstance(state, dict):
        raise ValueError(f"TFT checkpoint '{path}' holds no state dict (expected {{'model': ...}})")
    # Later DeepLearningExamples versions wrap the back half of the model in `TFTpart2.`.
    return {k.replace("TFTpart2.", ""): v for k, v in state.items()}


def build_model(hparams: dict, checkpoint: str | None, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = TritonTFT(tft_config(hparams))
    if checkpoint:
        try:
            model.model.load_state_dict(_state_dict(checkpoint), strict=True)
        except RuntimeError as err:
            raise ValueError(
                f"TFT checkpoint '{checkpoint}' does not match the configured hparams: {err}"
            ) from None
    return model.eval()


def generate_dataset(hparams: dict, out_dir: str, seed: int, n_ids: int,
                     n_timesteps: int) -> None:
    tft_data.generate(out_dir, n_ids, n_timesteps, seed)


def load_split(hparams: dict, data_dir: str, split: str, max_samples: int | None):
    data = tft_data.load(data_dir, split, hparams["example_length"],
                         hparams.get("dataset_stride", 1), max_samples)
    n = len(data["target"])
    dummy_f = np.zeros((n, 1), dtype=np.float32)  # absent input groups, as in the seed
    dummy_i = np.zeros((n, 1), dtype=np.int64)
    inputs = [data["s_cat"], dummy_f, dummy_i, data["k_cont"], dummy_i, dummy_f,
              data["target"], data["id"]]
    future = data["target"][:, hparams["encoder_length"] :, :]
    return inputs, [future]


def evaluate(hparams: dict, predictions: list, targets: list) -> dict[str, float]:
    """Normalised quantile risk per quantile, as DeepLearningExamples reports it:
    2 * sum(quantile loss) / sum(|target|), on the (normalised) targets."""
    pred, tgt = predictions[0].astype(np.float64), targets[0].astype(np.float64)
    quantiles = np.asarray(hparams["quantiles"])
    diff = pred - tgt  # [N, horizon, quantiles] - [N, horizon, 1]
    loss = (1 - quantiles) * np.clip(diff, 0, None) + quantiles * np.clip(-diff, 0, None)
    risk = 2 * loss.reshape(-1, len(quantiles)).sum(0) / np.abs(tgt).sum()
    return {f"p{round(q * 100)}_risk": float(r) for q, r in zip(quantiles, risk, strict=True)}
