"""Outbrain click prediction data for the Wide & Deep plug-in, in the layout of
DeepLearningExamples' TensorFlow2 WideAndDeep: NVTabular's preprocessed Outbrain as
parquet files.

    <data_dir>/<split>/*.parquet           (splits: train, valid; DLE's names; the reference
                                            reads valid/*.parquet)
    <data_dir>/feature_spec.yaml           (optional: which files and features)

Each parquet file holds one row per sample and a column per feature, the samples of one
display contiguous:
- each one-hot categorical feature: its ids, int8/int16/int32 (the smallest type whose
  max exceeds the cardinality) - ids in [0, cardinality);
- each multi-hot categorical feature (topic_id_list, entity_id_list, category_id_list):
  a list of 0 to `hotness` ids of that type per sample (NVTabular's ListSlice(3) and
  HashBucket output), padded with -1 only when fed to the model (`padded`);
- each numerical feature: float32;
- `display_id`: int64, the page view the ad was shown in (DLE's DISPLAY_ID_COLUMN);
- `clicked`: int8 0/1, the label (DLE's label column); one click per display.

feature_spec.yaml (after DLE's later feature spec): `feature_spec` (per feature: dtype,
and cardinality for categorical ones, max_hotness for multi-hot ones), `channel_spec`
(categorical / numerical / label / display_id feature names, in model order),
`source_spec` (per split: chunks of type `parquet`, with their features and files
relative to the yaml's folder) and `metadata`. Without it (the NVTabular output of the
reference's era), a split is every `<split>/*.parquet` file with all its columns.
Feature names are DLE's NVTabular Outbrain names (see config/models/widedeep.yaml).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import yaml

from ...plugins import categorical_dtype

SPLITS = ("train", "valid")
PARQUET = "parquet"
LABEL = "clicked"
DISPLAY_ID = "display_id"
PADDING = -1  # fills a short multi-hot list, as DLE's triton/tf_dataloader.py does


class Categorical(NamedTuple):
    name: str
    cardinality: int
    hotness: int = 1  # ids per sample: 1 one-hot, more a multi-hot list


def feature_spec(categorical: list[Categorical], numerical: list[str]) -> dict:
    """The feature spec of `categorical` features and `numerical` names (a multi-hot
    feature's dtype is its ids')."""
    features = {}
    for f in categorical:
        features[f.name] = {"dtype": str(categorical_dtype(f.cardinality)),
                            "cardinality": int(f.cardinality)}
        if f.hotness > 1:
            features[f.name]["max_hotness"] = int(f.hotness)
    features.update({name: {"dtype": "float32"} for name in numerical})
    features[DISPLAY_ID] = {"dtype": "int64"}
    features[LABEL] = {"dtype": "int8"}
    cat_names = [f.name for f in categorical]
    names = [*cat_names, *numerical, DISPLAY_ID, LABEL]
    source = {split: [{"type": PARQUET, "features": names,
                       "files": [f"{split}/part_0.parquet"]}] for split in SPLITS}
    return {"feature_spec": features, "source_spec": source,
            "channel_spec": {"categorical": cat_names, "numerical": list(numerical),
                             "label": [LABEL], "display_id": [DISPLAY_ID]},
            "metadata": {"generated_by": "deploybench"}}


def synthesize(rng: np.random.Generator, n: int, cardinalities: list[int],
               hotness: list[int], num_numerical: int, first_display: int = 0
               ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """([ids int64 [n, hotness] per categorical feature], numerical float32 [n, F],
    display_id int64 [n], clicked int8 [n]): displays of 2 to 6 ads (the last one may be
    shorter), ids skewed toward low values, multi-hot lists of 0 to hotness ids (padded
    with -1), numerical features in [0, 1] (CTRs, similarities, log-scaled counts), and
    exactly one click per display, drawn from a softmax over a fixed random logistic
    score of the features (every id of a list included), so that a model can learn to
    rank (MAP@12 above chance)."""
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(2, 7)))
    sizes[-1] -= sum(sizes) - n
    sizes = [s for s in sizes if s > 0]
    display = np.repeat(np.arange(first_display, first_display + len(sizes),
                                  dtype=np.int64), sizes)
    ids = []
    for card, hot in zip(cardinalities, hotness):
        x = np.minimum(np.floor(card * rng.random((n, hot)) ** 3).astype(np.int64), card - 1)
        if hot > 1:
            lengths = rng.integers(0, hot + 1, n)
            x[np.arange(hot) >= lengths[:, None]] = PADDING
        ids.append(x)
    numerical = rng.beta(2.0, 5.0, size=(n, num_numerical)).astype(np.float32)
    w_num = rng.normal(0, 2.0, num_numerical)
    id_effect = np.zeros(n)
    for x in ids:
        salt = rng.integers(1, 2 ** 31)
        effect = ((x * 2654435761 + salt) % 1000) / 1000.0 - 0.5
        id_effect += np.where(x >= 0, effect, 0.0).sum(axis=1)
    score = numerical.astype(np.float64) @ w_num + id_effect
    clicked = np.zeros(n, dtype=np.int8)
    start = 0
    for size in sizes:
        s = score[start:start + size]
        p = np.exp(2.0 * (s - s.max()))
        clicked[start + rng.choice(size, p=p / p.sum())] = 1
        start += size
    return ids, numerical, display, clicked


def generate(out_dir: str | Path, categorical: list[Categorical], numerical: list[str],
             sizes: dict[str, int], seed: int) -> None:
    """Write `sizes[split]` synthetic samples per split and the feature spec."""
    out = Path(out_dir)
    spec = feature_spec(categorical, numerical)
    rng = np.random.default_rng(seed)
    first = 0
    for split in SPLITS:
        (out / split).mkdir(parents=True, exist_ok=True)
        ids, num, display, clicked = synthesize(
            rng, sizes[split], [f.cardinality for f in categorical],
            [f.hotness for f in categorical], len(numerical), first)
        first = int(display[-1]) + 1 if len(display) else first
        columns = {f.name: _column(x, f.hotness, spec["feature_spec"][f.name]["dtype"])
                   for f, x in zip(categorical, ids)}
        columns |= {name: num[:, i] for i, name in enumerate(numerical)}
        columns |= {DISPLAY_ID: display, LABEL: clicked}
        pd.DataFrame(columns).to_parquet(out / split / "part_0.parquet", index=False)
    with open(out / "feature_spec.yaml", "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)


def _column(ids: np.ndarray, hotness: int, dtype: str):
    """A categorical feature's parquet column: its ids, or a multi-hot feature's lists
    (the padding left out)."""
    if hotness == 1:
        return ids[:, 0].astype(dtype)
    return [row[row != PADDING].astype(dtype) for row in ids]


def padded(column, hotness: int) -> np.ndarray:
    """A categorical column as the model takes it: int32 [N, hotness]; each multi-hot
    list cut to `hotness` ids or padded with -1 (DLE's tf_dataloader.py), an empty or
    null one all padding."""
    if hotness == 1:
        return np.asarray(column).astype(np.int32).reshape(-1, 1)
    out = np.full((len(column), hotness), PADDING, np.int32)
    for i, ids in enumerate(column):
        if ids is not None:
            ids = np.asarray(ids)[:hotness]
            out[i, :len(ids)] = ids
    return out


def read_spec(data_dir: str | Path) -> dict | None:
    path = Path(data_dir) / "feature_spec.yaml"
    if not path.is_file():
        return None
    with open(path) as f:
        return yaml.safe_load(f)


def reference_era_sources(data_dir: str | Path) -> dict:
    """The source spec of a folder without feature_spec.yaml: each split's
    `<split>/*.parquet` files (the reference's --data-pattern), all their columns."""
    sources = {}
    for split in SPLITS:
        files = sorted(p.relative_to(data_dir).as_posix()
                       for p in (Path(data_dir) / split).glob("*.parquet"))
        if files:
            sources[split] = [{"type": PARQUET, "features": None, "files": files}]
    if not sources:
        raise FileNotFoundError(f"Outbrain dataset '{data_dir}' has neither a "
                                f"feature_spec.yaml nor <split>/*.parquet files")
    return sources


def load(data_dir: str | Path, split: str, max_samples: int | None) -> dict[str, np.ndarray]:
    """{feature name: 1-D array} of the first `max_samples` samples of a split (all when
    None), for every feature of the spec (categorical, numerical, label, display_id); a
    multi-hot feature's is an object array of id arrays."""
    spec = read_spec(data_dir)
    sources = spec["source_spec"] if spec else reference_era_sources(data_dir)
    if split not in sources:
        raise ValueError(f"Outbrain dataset '{data_dir}' has no split '{split}'; its "
                         f"splits: {', '.join(sources)}")
    frames = []
    for chunk in sources[split]:
        if chunk.get("type") != PARQUET:
            raise ValueError(f"'{data_dir}': chunk {chunk} is not of type {PARQUET}")
        parts = []
        for file in chunk["files"]:
            path = Path(data_dir) / file
            if not path.is_file():
                raise FileNotFoundError(f"Outbrain data file '{path}' does not exist")
            parts.append(pd.read_parquet(path, columns=chunk["features"]))
        frames.append(pd.concat(parts, ignore_index=True))
    lengths = {len(f) for f in frames}
    if len(lengths) > 1:
        raise ValueError(f"'{data_dir}' split '{split}': chunks hold different sample "
                         f"counts ({sorted(lengths)})")
    table = pd.concat(frames, axis=1).iloc[:max_samples]
    return {name: table[name].to_numpy() for name in table.columns}
