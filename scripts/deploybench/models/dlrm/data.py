"""Criteo click logs in DeepLearningExamples' TensorFlow2 DLRM "split binary" layout
(`dataloading/feature_spec.py` get_default_feature_spec, read by
`dataloading/raw_binary_dataset.py` TfRawBinaryDataset):

    <data_dir>/feature_spec.yaml
    <data_dir>/train/{label.bin, numerical.bin, cat_0.bin ... cat_25.bin}
    <data_dir>/test/{label.bin, numerical.bin, cat_0.bin ... cat_25.bin}

Headerless little-endian arrays, one record per sample, in the same sample order in
every file of a split:
- label.bin: the click label, numpy bool (one byte, 0/1; DLE reads it as int8);
- numerical.bin: the 13 numerical features, float16 [N, 13] row-major (DLE's
  preprocessing stores log(x + 1) of Criteo's integer features);
- cat_<i>.bin: categorical feature i's ids, int8, int16 or int32: the smallest type whose
  max exceeds the cardinality (DLE's get_categorical_feature_type).

feature_spec.yaml: `feature_spec` (per feature: dtype, and cardinality for categorical
ones), `channel_spec` (categorical / numerical / label feature names, in model order),
`source_spec` (per split: chunks of type split_binary, their features and file, relative
to the yaml's folder) and `metadata`. Feature names are DLE's defaults: num_<i>, label,
and cat_<i>.bin for categorical features (DLE names them after their file).
`load` follows any such spec (also DLE's preprocessed Criteo 1TB), not only these names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from ...plugins import categorical_dtype

SPLITS = ("train", "test")
SPLIT_BINARY = "split_binary"
# The ids' dtype as DLE's loader yields them and its Triton models take them (INT32):
# the widest type get_categorical_feature_type stores.
ID_DTYPE = np.dtype(np.int32)


def feature_spec(num_numerical: int, cardinalities: list[int]) -> dict:
    """DLE's default feature spec for the split binary layout."""
    cat_names = [f"cat_{i}.bin" for i in range(len(cardinalities))]
    num_names = [f"num_{i}" for i in range(num_numerical)]
    features = {name: {"dtype": str(categorical_dtype(n)), "cardinality": int(n)}
                for name, n in zip(cat_names, cardinalities)}
    features.update({name: {"dtype": "float16"} for name in num_names})
    features["label"] = {"dtype": "bool"}
    source = {}
    for split in SPLITS:
        source[split] = (
            [{"type": SPLIT_BINARY, "features": num_names, "files": [f"{split}/numerical.bin"]},
             {"type": SPLIT_BINARY, "features": ["label"], "files": [f"{split}/label.bin"]}]
            + [{"type": SPLIT_BINARY, "features": [name], "files": [f"{split}/{name}"]}
               for name in cat_names])
    return {"feature_spec": features, "source_spec": source,
            "channel_spec": {"categorical": cat_names, "numerical": num_names,
                             "label": ["label"]},
            "metadata": {}}


def synthesize(rng: np.random.Generator, n: int, num_numerical: int,
               cardinalities: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(label bool [n], numerical float16 [n, F], ids int64 [n, T]): Criteo-like
    samples. Numerical features are log(1 + counts) of heavy-tailed counts; ids are
    skewed toward low values (frequent ones); the click label follows a fixed random
    logistic model of both, so a model can learn something (about 25% positives)."""
    counts = np.floor(rng.lognormal(mean=1.0, sigma=1.5, size=(n, num_numerical)))
    numerical = np.log1p(counts).astype(np.float16)
    card = np.asarray(cardinalities, dtype=np.int64)
    ids = np.minimum(np.floor(card * rng.random((n, len(card))) ** 3).astype(np.int64),
                     card - 1)
    # the hidden click model: numerical weights, and a weight per id (hashed)
    w_num = rng.normal(0, 0.5, num_numerical)
    salt = rng.integers(1, 2 ** 31, len(card))
    id_effect = (((ids * 2654435761 + salt) % 1000) / 1000.0 - 0.5).sum(axis=1)
    logit = (numerical.astype(np.float64) - 1.5) @ w_num + id_effect - 1.2
    label = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
    return label, numerical, ids


def generate(out_dir: str | Path, num_numerical: int, cardinalities: list[int],
             sizes: dict[str, int], seed: int) -> None:
    """Write `sizes[split]` synthetic samples per split and the feature spec."""
    out = Path(out_dir)
    spec = feature_spec(num_numerical, cardinalities)
    rng = np.random.default_rng(seed)
    for split in SPLITS:
        (out / split).mkdir(parents=True, exist_ok=True)
        label, numerical, ids = synthesize(rng, sizes[split], num_numerical, cardinalities)
        label.astype(np.bool_).tofile(out / split / "label.bin")
        numerical.astype(np.float16).tofile(out / split / "numerical.bin")
        for i, name in enumerate(spec["channel_spec"]["categorical"]):
            dtype = np.dtype(spec["feature_spec"][name]["dtype"])
            ids[:, i].astype(dtype).tofile(out / split / name)
    with open(out / "feature_spec.yaml", "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)


def read_spec(data_dir: str | Path) -> dict:
    path = Path(data_dir) / "feature_spec.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"Criteo dataset '{data_dir}' has no feature_spec.yaml")
    with open(path) as f:
        return yaml.safe_load(f)


def _read(path: Path, dtype: np.dtype, width: int, max_samples: int | None) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"Criteo data file '{path}' does not exist")
    record = dtype.itemsize * width
    size = path.stat().st_size
    if size % record:
        raise ValueError(f"'{path}' holds {size} bytes, not a whole number of "
                         f"{record}-byte records")
    count = -1 if max_samples is None else max_samples * width
    return np.fromfile(path, dtype=dtype, count=count).reshape(-1, width)


def load(data_dir: str | Path, split: str, max_samples: int | None
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(label int8 [N], numerical float16 [N, F], ids int32 [N, T], cardinalities) of
    the first `max_samples` samples of a split (all when None), features in channel
    order."""
    spec = read_spec(data_dir)
    sources = spec["source_spec"]
    if split not in sources:
        raise ValueError(f"Criteo dataset '{data_dir}' has no split '{split}'; its "
                         f"splits: {', '.join(sources)}")
    features, channels = spec["feature_spec"], spec["channel_spec"]
    files = {}
    for chunk in sources[split]:
        if chunk.get("type", SPLIT_BINARY) != SPLIT_BINARY:
            raise ValueError(f"'{data_dir}': chunk type '{chunk['type']}' is not "
                             f"{SPLIT_BINARY}")
        files[tuple(chunk["features"])] = Path(data_dir) / chunk["files"][0]
    num_names = list(channels["numerical"])
    if num_names and tuple(num_names) not in files:
        raise ValueError(f"'{data_dir}': numerical features are not in one file in "
                         f"channel order")
    base = Path(data_dir)
    label_name = channels["label"][0]
    # DLE writes bool and reads int8: one byte either way
    label = _read(files[(label_name,)], np.dtype(np.int8), 1, max_samples)[:, 0]
    n = len(label)
    if num_names:
        numerical = _read(files[tuple(num_names)], np.dtype(features[num_names[0]]["dtype"]),
                          len(num_names), max_samples)
    else:
        numerical = np.zeros((n, 0), dtype=np.float16)
    cats, cards = [], []
    for name in channels["categorical"]:
        dtype = np.dtype(features[name]["dtype"])
        if not np.can_cast(dtype, ID_DTYPE):
            raise ValueError(f"'{data_dir}': categorical feature '{name}' is stored as {dtype}; "
                             f"DLE's ids are at most {ID_DTYPE} (the models' INT32 input)")
        cats.append(_read(files[(name,)], dtype, 1, max_samples)[:, 0].astype(ID_DTYPE))
        cards.append(int(features[name]["cardinality"]))
    ids = np.stack(cats, axis=1) if cats else np.zeros((n, 0), dtype=ID_DTYPE)
    if len(numerical) != n or len(ids) != n:
        raise ValueError(f"'{base}' split '{split}': files hold different sample counts")
    return label, numerical, ids, cards
