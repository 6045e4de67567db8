"""FastPitch plug-in: the model, its data and its statistics (see deploybench.plugins).

Follows DeepLearningExamples' PyTorch FastPitch 1.0 and its `triton/` folder (April
2021, checkpoint `nvidia_fastpitch_200518.pt`): the network (`net`, with the
fixed-length outputs Triton's dynamic batching needs), the text front end
(`text`), the LJSpeech filelists (`data`) and the Triton tensors of
its `triton/model.py`: INPUT__0 text symbols, INPUT__1 text lengths; OUTPUT__0 mel,
OUTPUT__1 mel lengths, OUTPUT__2 durations, OUTPUT__3 pitch.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ...plugins import read_torch_file
from . import data
from .net import FastPitch
from .text import PAD_ID, symbols

# DLE's model_config entries (saved as a checkpoint's 'config') that equal hparams.
_CHECKED_CONFIG = (
    "n_mel_channels", "symbols_embedding_dim", "n_speakers", "pitch_embedding_kernel_size",
    *(f"{p}_fft_{k}" for p in ("in", "out") for k in (
        "n_layers", "n_heads", "d_head", "conv1d_kernel_size", "conv1d_filter_size",
        "output_size")),
    *(f"{p}_predictor_{k}" for p in ("dur", "pitch") for k in (
        "kernel_size", "filter_size", "n_layers")),
)


def _dle_config(hparams: dict) -> dict:
    """What DLE's get_model_config would hold for these hparams (the checked part)."""
    derived = {"n_symbols": len(symbols(hparams["symbol_set"])), "padding_idx": PAD_ID,
               "n_speakers": hparams.get("n_speakers", 1)}
    return {**{k: hparams[k] for k in _CHECKED_CONFIG if k in hparams}, **derived}


def read_checkpoint(checkpoint: str) -> tuple[dict, dict | None]:
    """(state_dict, config or None) of a DLE FastPitch checkpoint: train.py's
    {'state_dict', 'config', 'optimizer', ...} (`module.` prefixes of a DDP model are
    dropped, as DLE's load_model_from_ckpt does), or a bare state_dict."""
    path = Path(checkpoint)
    ckpt = read_torch_file(path, "FastPitch")  # tensors and plain values: all DLE saves
    if not isinstance(ckpt, dict):
        raise ValueError(f"FastPitch checkpoint '{path}' holds a {type(ckpt).__name__}, "
                         "not a dict")
    state = ckpt.get("state_dict", ckpt)
    if not isinstance(state, dict) or not state or not all(
            isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"FastPitch checkpoint '{path}' holds no state_dict")
    config = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else None
    return {k.removeprefix("module."): v for k, v in state.items()}, config


def _check_config(config: dict, hparams: dict, path: str) -> None:
    wrong = [f"{key}: checkpoint {config[key]!r}, hparams {value!r}"
             for key, value in _dle_config(hparams).items()
             if key in config and config[key] != value]
    if wrong:
        raise ValueError(f"FastPitch checkpoint '{path}' was trained with another "
                         "configuration: " + "; ".join(wrong))


def _mismatch(state: dict, expected: dict) -> str:
    """What keeps `state` from loading into a model with `expected` (its state_dict)."""
    def some(keys: list[str]) -> str:
        return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [f"{k} {list(state[k].shape)} (model {list(v.shape)})"
              for k, v in expected.items() if k in state and state[k].shape != v.shape]
    parts = [f"{len(keys)} {what}: {some(keys)}" for what, keys in (
        ("missing", missing), ("unexpected", unexpected), ("of another shape", shapes)) if keys]
    return "; ".join(parts)


def _init_durations(model: FastPitch, frames_per_symbol: float) -> None:
    """A random duration predictor predicts log(1 + d) around 0, so about no frames per
    symbol and an empty mel: start its output bias at log(1 + frames_per_symbol), so that
    the median duration is typical of LJSpeech and the decoder does realistic work. The
    weights stay random: the mel is noise, not speech."""
    with torch.no_grad():
        model.duration_predictor.fc.bias.fill_(math.log1p(frames_per_symbol))


def build_model(hparams: dict, checkpoint: str | None, seed: int) -> torch.nn.Module:
    """The Triton-facing FastPitch (eval, FP32, CPU): DLE checkpoint weights, or a
    seeded initialisation when `checkpoint` is None."""
    torch.manual_seed(seed)
    model = FastPitch(hparams)
    if checkpoint is None:
        _init_durations(model, hparams["init_frames_per_symbol"])
    else:
        state, config = read_checkpoint(checkpoint)
        if config is not None:
            _check_config(config, hparams, checkpoint)
        problem = _mismatch(state, model.state_dict())
        if problem:
            raise ValueError(f"FastPitch checkpoint '{checkpoint}' does not fit the "
                             f"configured hparams: tensors {problem}")
        model.load_state_dict(state, strict=True)
    return model.float().eval()


def generate_dataset(hparams: dict, out_dir: str, seed: int, samples: int) -> None:
    """DLE's LJSpeech filelists (train, val, test) of `samples` generated sentences."""
    data.generate(out_dir, seed, samples)


def load_split(hparams: dict, data_dir: str, split: str,
               max_samples: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The first `max_samples` texts of the split's filelist (all when None) as DLE's
    text pipeline encodes them: inputs [symbols [N, text_length] int64 padded with 0,
    lengths [N, 1] int64]; targets [symbols used [N], symbols before cutting [N]]
    (int64; they differ where a text was longer than text_length)."""
    path = data.filelist_path(data_dir, split)
    texts = data.read_texts(path, hparams.get("n_speakers", 1), max_samples)
    if not texts:
        raise ValueError(f"filelist {path} holds no texts")
    ids, full = data.encode(texts, hparams["symbol_set"], hparams["text_length"])
    used = np.minimum(full, hparams["text_length"])
    return [ids, used[:, None].copy()], [used, full]


def perf_inputs(hparams: dict, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """DLE's triton/prepare_input_data.py: one real text, its symbols repeated until they
    fill text_length (the reference's SEQUENCE_LENGTH 128) and cut there; its length that."""
    ids, lengths = inputs
    length = hparams["text_length"]
    text = np.resize(ids[0, :int(lengths[0, 0])], length)  # resize repeats the symbols
    return [text[None, :].astype(ids.dtype), np.full((1, 1), length, dtype=lengths.dtype)]


# DLE's triton/metrics.py: a mel is right if its values lie in this range (LJSpeech's
# log-mel spectrograms span -11.5 to 2.1).
MEL_RANGE = (-15.0, 3.0)


def evaluate(hparams: dict, predictions: list[np.ndarray],
             targets: list[np.ndarray]) -> dict[str, float]:
    """DLE's Triton accuracy (the share of mels whose valid frames lie in MEL_RANGE) and
    what a TTS user checks of the outputs: mel lengths in frames (their total an exact
    integer, comparable across runs), frames per symbol, the share of mels cut at
    max_mel_frames, the share whose length is not the sum of its rounded durations, mean
    duration and (normalised) pitch over the text's symbols, and the share of texts cut
    to text_length. The deviation from the native mel is the toolkit's."""
    mel, mel_lengths, durations, pitch = predictions
    used, full = (np.asarray(t, dtype=np.int64) for t in targets)
    lengths = np.asarray(mel_lengths).reshape(-1).astype(np.int64)
    n, text_length = durations.shape
    if mel.shape[0] != n or len(lengths) != n or len(used) != n:
        raise ValueError(f"predictions for {mel.shape[0]}, {len(lengths)}, {n} samples, "
                         f"targets for {len(used)}")
    valid = np.arange(text_length) < used[:, None]
    max_frames = hparams["max_mel_frames"]
    rounded = np.floor(durations.astype(np.float64) + 0.5) * valid
    expected = np.minimum(rounded.sum(axis=1), max_frames).astype(np.int64)
    frames = np.arange(mel.shape[2]) < lengths[:, None]  # [N, F]
    low = np.where(frames, mel.min(axis=1), 0) >= MEL_RANGE[0]
    high = np.where(frames, mel.max(axis=1), 0) <= MEL_RANGE[1]
    return {
        "mel_in_range_fraction": float((low & high).all(axis=1).mean()),
        "mel_frames_total": int(lengths.sum()),
        "mel_frames_mean": float(lengths.mean()),
        "frames_per_symbol": float(lengths.sum() / max(1, used.sum())),
        "at_max_frames_fraction": float((lengths >= max_frames).mean()),
        "length_mismatch_fraction": float((lengths != expected).mean()),
        "duration_mean": float(durations[valid].astype(np.float64).mean()),
        "pitch_mean": float(pitch[valid].astype(np.float64).mean()),
        "truncated_text_fraction": float((full > text_length).mean()),
    }
