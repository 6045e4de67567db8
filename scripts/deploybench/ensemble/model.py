"""A sparse/dense ensemble as artifacts.of(run) serves it: the same functions as
deploybench.single, for a run whose backend has a `dense` key (hps-*)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..tensors import numpy_dtype
from ..triton import repository as triton_repository
from . import artifact, requests
from . import repository as ensemble_repository


def convert(run: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    """`out`: the dense export converted beside the sparse storage exported in `sparse`."""
    if sparse is None:
        raise ValueError(f"backend '{run['key']['backend']}' is an ensemble: its "
                         "conversion needs the sparse export")
    artifact.convert(run, exported, sparse, out)


def runner(converted: Path, run: dict) -> artifact.EnsembleRunner:
    return artifact.EnsembleRunner(converted, run)


def repository(run: dict, converted: Path, out: Path, available: list[str]) -> str:
    """The ensemble and its parts in the repository `out`; returns who serves it."""
    return ensemble_repository.create(
        run, converted, triton_repository.config_path(out, run["key"]["model"]), available)


def request_encoder(run: dict, config_pbtxt: Path):
    """Its flattened request (ensemble.requests), for triton.client's `encode`."""
    return requests.encoder(run["model"], requests.table_sizes(config_pbtxt))


def request_shapes(run: dict, batch: int) -> dict[str, list[int]]:
    """The shapes of a request of `batch` samples, the batch inside its tensors
    (perf_analyzer sends it at batch 1 with these --shape)."""
    return requests.shapes(run["model"], batch)


def request_data(run: dict, config_pbtxt: Path, perf_data: Path, data_dir: Path | None,
                 work: Path) -> tuple[dict, dict]:
    """perf_analyzer's --input-data per batch size of the offline sweep (its flattened
    requests, ensemble.requests.perf_samples, in a file per batch under `work`) and where
    its samples came from."""
    model = run["model"]
    samples, source = requests.perf_samples(model, data_dir,
                                            lambda: _perf_data_samples(run, perf_data))
    sizes = requests.table_sizes(config_pbtxt)
    files = {batch: requests.perf_data(model, sizes, samples, batch,
                                       work / f"perf_data_b{batch}.json")
             for batch in dict.fromkeys(model["offline"]["batch_sizes"])}
    return files, source


def cache_warmup(run: dict, data_dir: Path | None):
    """(description, batches of the model's samples) sent before the offline step
    measures (ensemble.requests.warmup_batches)."""
    return requests.warmup_batches(run["model"], data_dir)


def _perf_data_samples(run: dict, perf_data: Path) -> list[np.ndarray]:
    """The perf data's samples (one entry each) as arrays of the model's inputs."""
    entries = json.loads(Path(perf_data).read_text())["data"]
    return [np.stack([np.asarray(e[t["name"]]["content"], dtype=numpy_dtype(t["dtype"]))
                      .reshape(e[t["name"]]["shape"]) for e in entries])
            for t in run["model"]["inputs"]]
