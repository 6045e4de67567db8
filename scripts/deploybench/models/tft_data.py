"""TFT data in DeepLearningExamples' preprocessed binary format (`<dataset>_bin/`).

That format, as its `data_utils.py` writes it: `train.bin`, `valid.bin`, `test.bin`,
each a pickled list with one array per time series (id), of shape [time, columns];
the values are float32 stored as an int32 view (`.astype(np.float32).view(np.int32)`),
columns in the order of the dataset's feature list without DATE features. Electricity
and traffic have the columns: id, hours_from_start (time index), target, three known
continuous inputs (hour or time of day, day of week, hours from start), categorical id.
Targets and inputs are already normalised by the preprocessing.

`generate` writes a small dataset of that layout (daily and weekly seasonality plus
noise, per-series scale, then normalised per series like `scale_per_id`); `load`
reads the real one, cutting samples of `example_length` steps with `dataset_stride`.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

SPLITS = ("train", "valid", "test")
# Column roles of the electricity/traffic layout, in file order.
ID, TIME, TARGET, KNOWN, STATIC = 0, 1, 2, slice(3, 6), 6
N_COLUMNS = 7


def _series(rng: np.random.Generator, start: int, length: int) -> np.ndarray:
    hours = np.arange(start, start + length)
    daily = np.sin(2 * np.pi * hours / 24 + rng.uniform(0, 2 * np.pi))
    weekly = 0.5 * np.sin(2 * np.pi * hours / 168 + rng.uniform(0, 2 * np.pi))
    level = rng.uniform(1, 10)
    raw = level * (1.5 + daily + weekly) + rng.normal(0, 0.2 * level, length)
    return (raw - raw.mean()) / raw.std()  # scale_per_id


def generate(out_dir: str | Path, n_ids: int, n_timesteps: int, seed: int) -> None:
    """Write train/valid/test.bin: each split holds `n_timesteps` consecutive hours of
    every series (train first, then valid, then test)."""
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = {split: [] for split in SPLITS}
    for series_id in range(n_ids):
        total = n_timesteps * len(SPLITS)
        target = _series(rng, 0, total)
        for k, split in enumerate(SPLITS):
            hours = np.arange(k * n_timesteps, (k + 1) * n_timesteps)
            cols = np.empty((n_timesteps, N_COLUMNS), dtype=np.float64)
            cols[:, ID] = series_id
            cols[:, TIME] = hours
            cols[:, TARGET] = target[hours]
            # known inputs, standardised as the preprocessing does
            cols[:, 3] = (hours % 24 - 11.5) / 6.92
            cols[:, 4] = (hours // 24 % 7 - 3.0) / 2.0
            cols[:, 5] = (hours - total / 2) / (total / 3.46)
            cols[:, STATIC] = series_id
            groups[split].append(cols.astype(np.float32).view(np.int32))
    for split, arrays in groups.items():
        with open(out / f"{split}.bin", "wb") as f:
            pickle.dump(arrays, f)


def load(data_dir: str | Path, split: str, example_length: int, stride: int,
         max_samples: int | None) -> dict[str, np.ndarray]:
    """Samples of the split as arrays: s_cat [N,T,1] int64, k_cont [N,T,3] float32,
    target [N,T,1] float32, id [N,T,1] int64 (T = example_length)."""
    path = Path(data_dir) / f"{split}.bin"
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}'; valid: {', '.join(SPLITS)}")
    if not path.is_file():
        raise FileNotFoundError(f"TFT dataset file '{path}' does not exist")
    with open(path, "rb") as f:
        groups = pickle.load(f)
    windows = []
    for group in groups:
        values = np.asarray(group).view(np.float32)
        if values.ndim != 2 or values.shape[1] != N_COLUMNS:
            raise ValueError(f"{path}: series of shape {values.shape}, expected [time, "
                             f"{N_COLUMNS}] (the electricity/traffic column layout)")
        for start in range(0, len(values) - example_length + 1, stride):
            windows.append(values[start : start + example_length])
            if max_samples is not None and len(windows) >= max_samples:
                break
        if max_samples is not None and len(windows) >= max_samples:
            break
    if not windows:
        raise ValueError(f"{path}: no series has {example_length} time steps")
    data = np.stack(windows)
    return {
        "s_cat": data[:, :, STATIC : STATIC + 1].astype(np.int64),
        "k_cont": np.ascontiguousarray(data[:, :, KNOWN]),
        "target": np.ascontiguousarray(data[:, :, TARGET : TARGET + 1]),
        "id": data[:, :, ID : ID + 1].astype(np.int64),
    }
