"""TFT data in DeepLearningExamples' preprocessed binary format (`electricity_bin/`,
`traffic_bin/`), written by its `data_utils.preprocess` and read by `TFTBinaryDataset`.

The format: `train.bin`, `valid.bin`, `test.bin`, each a pickled list with one array per
time series, grouped and sorted by the encoded id, of shape [time, columns] and dtype
int32: float32 values stored as their bit pattern (`.astype(np.float32).view(np.int32)`).
The columns are the dataset's feature list without DATE features, in config order (the
ID feature first). Continuous columns are standardised per series with statistics of
the train split (`scale_per_id`), target included; categorical ones hold label codes.

For electricity and traffic the features are: id, hours_from_start (the TIME index),
the target, three known continuous inputs (hour or time of day, day of week,
hours_from_start) and a static categorical copy of the id. A config may give another
layout as `features`: a list of [name, input type, data type] like DLE's FeatureSpec.

The preprocessing also writes the sklearn scalers and encoders (`tgt_scalers.bin`,
`real_scalers.bin`, `cat_encodings.bin`, `id_encoders.bin`) and CSV copies of the splits;
TFTBinaryDataset reads none of them, and they need sklearn, so `generate` leaves them out.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from ...plugins import read_numpy_pickle

SPLITS = ("train", "valid", "test")
FEAT_NAMES = ("s_cat", "s_cont", "k_cat", "k_cont", "o_cat", "o_cont", "target", "id")
# (input type, data type) of each of FEAT_NAMES, as DLE's FEAT_ORDER.
FEAT_ORDER = (("STATIC", "CATEGORICAL"), ("STATIC", "CONTINUOUS"),
              ("KNOWN", "CATEGORICAL"), ("KNOWN", "CONTINUOUS"),
              ("OBSERVED", "CATEGORICAL"), ("OBSERVED", "CONTINUOUS"),
              ("TARGET", "CONTINUOUS"), ("ID", "CATEGORICAL"))
# DLE's ElectricityConfig.features (TrafficConfig: values, time_on_day; same roles).
ELECTRICITY_FEATURES = (
    ("id", "ID", "CATEGORICAL"),
    ("hours_from_start", "TIME", "CONTINUOUS"),
    ("power_usage", "TARGET", "CONTINUOUS"),
    ("hour", "KNOWN", "CONTINUOUS"),
    ("day_of_week", "KNOWN", "CONTINUOUS"),
    ("hours_from_start", "KNOWN", "CONTINUOUS"),
    ("categorical_id", "STATIC", "CATEGORICAL"),
)
# hours_from_start of DLE's first electricity train hour: day 1096 after 2011-01-01
FIRST_HOUR = 1096 * 24
FIRST_WEEKDAY = 5  # 2011-01-01 was a Saturday (pandas dayofweek 5)


def features(hparams: dict) -> list[tuple[str, str, str]]:
    """The binary columns' features: the config's `features`, else electricity's."""
    specs = [tuple(f) for f in hparams.get("features", ELECTRICITY_FEATURES)]
    return [f for f in specs if f[2] != "DATE"]  # DLE leaves dates out of the binary


def column_groups(hparams: dict) -> list[list[int]]:
    """The binary columns of each of FEAT_NAMES (DLE's feature_type_col_map), checked
    against the variable counts the model is built for."""
    specs = features(hparams)
    groups = [[i for i, (_, kind, dtype) in enumerate(specs) if (kind, dtype) == order]
              for order in FEAT_ORDER]
    expected = [len(hparams["static_categorical_inp_lens"]),
                hparams["static_continuous_inp_size"],
                len(hparams["temporal_known_categorical_inp_lens"]),
                hparams["temporal_known_continuous_inp_size"],
                len(hparams["temporal_observed_categorical_inp_lens"]),
                hparams["temporal_observed_continuous_inp_size"],
                hparams["temporal_target_size"], 1]
    found = [len(g) for g in groups]
    if found != expected:
        raise ValueError(f"the feature layout has {dict(zip(FEAT_NAMES, found))} columns, the "
                         f"hparams expect {dict(zip(FEAT_NAMES, expected))}")
    return groups


def _standardise(train: np.ndarray, values: np.ndarray) -> np.ndarray:
    """sklearn's StandardScaler fitted on `train`: population std, 1 where it is 0."""
    mean, std = train.mean(axis=0), train.std(axis=0)
    return (values - mean) / np.where(std == 0, 1.0, std)


def _power_usage(rng: np.random.Generator, hours: np.ndarray) -> np.ndarray:
    """Hourly consumption of one client: a daily profile peaking in the evening, lower at
    weekends, a level of its own and noise. Always positive, like kW readings."""
    level = rng.lognormal(mean=5.0, sigma=1.0)
    phase = rng.uniform(-2.0, 2.0)  # clients peak at different hours
    hour, weekday = hours % 24, (hours // 24 + FIRST_WEEKDAY) % 7
    daily = 1.0 + 0.4 * np.sin(2 * np.pi * (hour - 12 - phase) / 24)
    weekly = np.where(weekday >= 5, 0.8, 1.0)
    noise = rng.normal(1.0, 0.05, size=len(hours))
    return level * daily * weekly * noise


def split_starts(hparams: dict, n_timesteps: int) -> dict[str, int]:
    """Offsets of the splits in each series. Each split holds n_timesteps steps, and the
    valid and test splits start encoder_length steps before the previous one ends, as
    DLE's electricity ranges overlap (their first forecasts follow the previous split)."""
    step = n_timesteps - hparams["encoder_length"]
    return {split: k * step for k, split in enumerate(SPLITS)}


def generate(out_dir: str | Path, hparams: dict, n_ids: int, n_timesteps: int,
             seed: int) -> None:
    """Write train/valid/test.bin of `n_ids` synthetic electricity series."""
    if features(hparams) != list(ELECTRICITY_FEATURES):
        raise ValueError("the generator writes only the electricity/traffic feature layout")
    column_groups(hparams)  # the hparams fit that layout
    if n_ids > hparams["static_categorical_inp_lens"][0]:
        raise ValueError(f"{n_ids} series, but the id embedding has "
                         f"{hparams['static_categorical_inp_lens'][0]} rows")
    if n_timesteps < hparams["example_length"]:
        raise ValueError(f"n_timesteps {n_timesteps} is shorter than one example "
                         f"({hparams['example_length']} steps)")
    starts = split_starts(hparams, n_timesteps)
    hours = FIRST_HOUR + np.arange(starts["test"] + n_timesteps)
    train_rows = slice(0, n_timesteps)
    rng = np.random.default_rng(seed)
    grouped: dict[str, list[np.ndarray]] = {split: [] for split in SPLITS}
    for code in range(n_ids):  # ids come label-encoded and sorted, as DLE groups them
        # the known inputs: hour, day_of_week, hours_from_start
        real = np.stack([hours % 24, (hours // 24 + FIRST_WEEKDAY) % 7, hours], axis=1)
        real = _standardise(real[train_rows], real.astype(np.float64))
        target = _power_usage(rng, hours)
        target = _standardise(target[train_rows], target)
        table = np.column_stack([
            np.full(len(hours), code),  # id
            real[:, 2],                 # hours_from_start as TIME: the same scaled column
            target,                     # power_usage
            real,
            np.full(len(hours), code),  # categorical_id
        ])
        for split, start in starts.items():
            rows = table[start : start + n_timesteps]
            grouped[split].append(rows.astype(np.float32).view(np.int32))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for split, arrays in grouped.items():
        with open(out / f"{split}.bin", "wb") as f:
            pickle.dump(arrays, f)


def load(data_dir: str | Path, split: str, hparams: dict,
         max_samples: int | None) -> list[np.ndarray | None]:
    """The split's examples as DLE's TFTBinaryDataset yields them, in its index order
    (series by series; in a series, starts 0, stride, 2*stride, ...; series shorter than
    example_length left out), stacked: one array per FEAT_NAMES entry, [N, T, n] int64
    for categorical and float32 for continuous groups, None for absent groups."""
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}'; valid: {', '.join(SPLITS)}")
    path = Path(data_dir) / f"{split}.bin"
    groups = column_groups(hparams)
    n_columns = len(features(hparams))
    length, stride = hparams["example_length"], hparams.get("dataset_stride", 1)
    grouped = read_numpy_pickle(path, "TFT dataset")  # numpy arrays only: no code runs
    if not isinstance(grouped, list):
        raise ValueError(f"{path}: a {type(grouped).__name__}, expected a list of series")

    windows = []
    remaining = np.inf if max_samples is None else max_samples
    for series in grouped:
        values = np.asarray(series)
        if values.ndim != 2 or values.shape[1] != n_columns or values.itemsize != 4:
            raise ValueError(f"{path}: a series of {values.dtype}{list(values.shape)}, "
                             f"expected int32 [time, {n_columns}]")
        count = min((len(values) - length + 1) // stride, remaining)  # DLE's example count
        if count <= 0:
            continue
        steps = np.arange(count)[:, None] * stride + np.arange(length)
        windows.append(values.view(np.float32)[steps])  # [count, T, columns]
        remaining -= count
        if remaining == 0:
            break
    if not windows:
        raise ValueError(f"{path}: no series has {length} time steps")
    data = np.concatenate(windows)
    arrays: list[np.ndarray | None] = []
    for cols, (_, dtype) in zip(groups, FEAT_ORDER):
        if cols:
            kind = np.int64 if dtype == "CATEGORICAL" else np.float32
            arrays.append(np.ascontiguousarray(data[:, :, cols].astype(kind)))
        else:
            arrays.append(None)
    return arrays
