"""The ensemble's Triton interface, as reference 003's HPS ensemble takes it: one request per
batch, the batch inside the tensors (max_batch_size 0, no batcher dimension).

    EMB_KEY             INT64 [-1]     the B x T ids, sample by sample, each sample's ids
                                       table by table, each reduced modulo its table's
                                       size plus the table's offset: rows of the fused table
    EMB_N_KEY           INT32 [1]      B x T, the number of keys
    <the other inputs>  [-1, *dims]    as the model takes them (numerical_features [B, 13])
    <the outputs>       [-1, *dims]    DENSE_OUTPUT [B, 1]

The one place where a batch of the model's samples becomes that request: the in-process
runner, the accuracy client and the perf data all build it here. (DLE's client orders the
keys table-major over the batch; sample-major lets the lookups reshape to the dense part's
[B, T x dim] without a transpose.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import plugins
from ..runners.embeddings import fused_keys
from ..triton import config as triton_config
from ..triton.config import EMB_KEY, EMB_N_KEY
from .parts import settings, sparse_index

# The ensemble config's parameter that carries the fused table's layout to its clients.
TABLE_SIZES = "table_sizes"


def unbatched(spec: dict) -> dict:
    """A per-sample tensor spec as a max_batch_size-0 model declares it: the batch first."""
    return {**spec, "dims": [-1, *spec["dims"]]}


def inputs(model: dict) -> list[dict]:
    """The ensemble's inputs: the keys, their count, then the model's other inputs."""
    index = sparse_index(model)
    return [{"name": EMB_KEY, "dtype": "INT64", "dims": [-1]},
            {"name": EMB_N_KEY, "dtype": "INT32", "dims": [1]},
            *(unbatched(t) for i, t in enumerate(model["inputs"]) if i != index)]


def outputs(model: dict) -> list[dict]:
    return [unbatched(t) for t in model["outputs"]]


def tables(model: dict) -> int:
    """T, the number of ids per sample (the sparse input's width)."""
    return int(np.prod(model["inputs"][sparse_index(model)]["dims"]))


def flatten(model: dict, table_sizes, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """A batch of the model's samples (its inputs in order) -> the request's arrays, in
    the order of inputs(model)."""
    index = sparse_index(model)
    flat = fused_keys(arrays[index], table_sizes)
    rest = [np.ascontiguousarray(a) for i, a in enumerate(arrays) if i != index]
    return [flat, np.array([len(flat)], dtype=np.int32), *rest]


def dense_arrays(model: dict, request: list[np.ndarray], vectors: np.ndarray) -> list:
    """The dense part's inputs from a request and its looked-up vectors: the model's
    inputs in order, the vectors in the sparse input's place."""
    rest = iter(request[2:])
    return [vectors if i == sparse_index(model) else next(rest)
            for i in range(len(model["inputs"]))]


def shapes(model: dict, batch: int) -> dict[str, list[int]]:
    """Each input's shape in the request of a batch (perf_analyzer's --shape)."""
    return {t["name"]: ([batch * tables(model)] if t["name"] == EMB_KEY
                        else [1] if t["name"] == EMB_N_KEY else [batch, *t["dims"][1:]])
            for t in inputs(model)}


def table_sizes(config_pbtxt: Path) -> list[int]:
    """The fused table's layout, from the served ensemble's config."""
    config = triton_config.read(config_pbtxt)
    if TABLE_SIZES not in config.parameters:
        raise ValueError(f"{config_pbtxt} has no '{TABLE_SIZES}' parameter: not an ensemble "
                         "with the flattened interface (rebuild its model repository)")
    return json.loads(config.parameters[TABLE_SIZES].string_value)


def encoder(model: dict, sizes):
    """arrays of the model's samples -> [(tensor spec, array)] of the request (the
    clients' `encode`)."""
    specs = inputs(model)
    settings(model)  # a clear error for a model that is no ensemble

    def encode(arrays: list[np.ndarray]) -> list[tuple[dict, np.ndarray]]:
        return list(zip(specs, flatten(model, sizes, arrays), strict=True))

    return encode


def _cycled(arrays: list[np.ndarray], start: int, count: int) -> list[np.ndarray]:
    """`count` consecutive samples from `start`, wrapping around the arrays' samples."""
    index = (start + np.arange(count)) % len(arrays[0])
    return [np.ascontiguousarray(a[index]) for a in arrays]


def _split(model: dict, data_dir: Path, split: str, count: int) -> list[np.ndarray]:
    inputs, _ = plugins.load(model["plugin"]).load_split(model["hparams"], str(data_dir),
                                                         split, count)
    if not len(inputs[0]):
        raise ValueError(f"split '{split}' of '{data_dir}' has no samples")
    return inputs


def perf_samples(model: dict, data_dir: Path | None, fallback) -> tuple[list, dict]:
    """The samples the offline requests are made of, and where they came from:
    `ensemble.perf_samples` of the data split (the reference's 262,144; a split with fewer is
    taken in turn up to the count), or `fallback()` (the perf data's samples)."""
    count = settings(model).get("perf_samples")
    if not count or data_dir is None:
        samples = fallback()
        return samples, {"samples": len(samples[0]), "source": "perf_data.json"}
    split = model["data"]["split"]
    distinct = _split(model, data_dir, split, count)
    return _cycled(distinct, 0, count), {"samples": count, "source": f"split {split}",
                                         "distinct": len(distinct[0])}


def warmup_batches(model: dict, data_dir: Path | None):
    """(description, batches): the cache warm-up before the offline step measures,
    `ensemble.warmup_samples` training samples in batches of accuracy.batch_size (the
    reference's evaluate_accuracy over 1000 x 16384 training samples); none without it."""
    total = settings(model).get("warmup_samples", 0)
    if not total or data_dir is None:
        return None, iter(())
    batch = model["accuracy"]["batch_size"]
    distinct = _split(model, data_dir, "train", total)
    count = -(-total // batch)
    described = {"samples": count * batch, "batch_size": batch, "requests": count,
                 "split": "train", "distinct": len(distinct[0])}
    return described, (_cycled(distinct, i * batch, batch) for i in range(count))


def perf_data(model: dict, sizes, samples: list[np.ndarray], batch: int, out: Path) -> Path:
    """perf_analyzer --input-data of a batch size: ceil(samples / batch) flattened
    requests of `batch` consecutive samples (wrapping around), sent in turn."""
    entries = []
    for start in range(0, len(samples[0]), batch):
        request = flatten(model, sizes, _cycled(samples, start, batch))
        entries.append({t["name"]: {"content": a.ravel().tolist(), "shape": list(a.shape)}
                        for t, a in zip(inputs(model), request)})
    out.write_text(json.dumps({"data": entries}))
    return out
