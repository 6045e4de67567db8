"""A run's artifacts, single model or ensemble: the one place that tells them apart.

The steps ask here for what to export, how to convert, which runner runs the converted
model in-process, how to write the model repository and how to serve a scenario; a run
whose backend has a `dense` key (hps-*) is a sparse/dense ensemble (deploybench.ensemble),
any other a single model (deploybench.single, deploybench.triton.repository).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import atomic, single
from .backends import is_ensemble
from .ensemble import artifact as ensemble_artifact
from .ensemble import metrics as ensemble_metrics
from .ensemble import parts as ensemble_parts
from .ensemble import repository as ensemble_repository
from .ensemble import requests as ensemble_requests
from .runners import Runner
from .tensors import numpy_dtype
from .triton import config as triton_config
from .triton import repository as triton_repository


def exportable(settings: dict, fmt: str, model) -> tuple[object, list[dict]]:
    """What an export of `fmt` writes out, and its inputs: the whole source model, or for
    a dense-* format the dense part of a recommender (the looked-up vectors in place of
    the ids)."""
    if fmt.startswith("dense-"):
        return ensemble_parts.dense_model(settings, model)
    return model, settings["inputs"]


def export_sparse(settings: dict, weights: Path, data: Path, out: Path) -> None:
    """A recommender's embedding storage, once per model (ensembles only)."""
    ensemble_artifact.export_sparse(settings, weights, data, out)


def convert(run: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    """`out`: the exported model converted for the run; for an ensemble, the dense export
    converted beside the sparse storage exported in `sparse`."""
    if is_ensemble(run):
        if sparse is None:
            raise ValueError(f"backend '{run['key']['backend']}' is an ensemble: its "
                             "conversion needs the sparse export")
        ensemble_artifact.convert(run, exported, sparse, out)
    else:
        with atomic.output(out) as tmp:
            single.convert(run, exported, tmp)


def runner(converted: Path, run: dict) -> Runner:
    """The converted model in-process: list of input arrays -> list of outputs."""
    if is_ensemble(run):
        return ensemble_artifact.EnsembleRunner(converted, run)
    return single.runner(converted, run)


def repository(run: dict, converted: Path, out: Path, available: list[str]) -> str:
    """Write the model's deployments (or an ensemble and its parts) into the repository
    `out`, for a server whose backends are `available`; returns who serves it."""
    if is_ensemble(run):
        return ensemble_repository.create(
            run, converted, triton_repository.config_path(out, run["key"]["model"]),
            available)
    return triton_repository.create(run, converted, out, available)


def request_encoder(run: dict, config_pbtxt: Path):
    """How a client sends a batch of the model's samples to the served `config_pbtxt`
    (triton.client's `encode`): None for a single model (the samples as they are); for an
    ensemble its flattened request (ensemble.requests)."""
    if not is_ensemble(run):
        return None
    return ensemble_requests.encoder(run["model"], ensemble_requests.table_sizes(config_pbtxt))


def request_shapes(run: dict, batch: int) -> dict[str, list[int]]:
    """The shapes of a request of `batch` samples where the batch is inside the tensors
    (an ensemble: perf_analyzer sends it at batch 1 with these --shape); empty for a
    single model (perf_analyzer's -b is the batch)."""
    return ensemble_requests.shapes(run["model"], batch) if is_ensemble(run) else {}


def request_data(run: dict, config_pbtxt: Path, perf_data: Path, data_dir: Path | None,
                 work: Path) -> tuple[dict, dict]:
    """perf_analyzer's --input-data per batch size of the offline sweep, and where its
    samples came from: an ensemble's flattened requests (ensemble.requests.perf_samples)
    in a file per batch under `work`; empty for a single model (the perf data itself,
    one entry per sample, -b batches them)."""
    if not is_ensemble(run):
        return {}, {}
    model = run["model"]
    samples, source = ensemble_requests.perf_samples(
        model, data_dir, lambda: _perf_data_samples(run, perf_data))
    sizes = ensemble_requests.table_sizes(config_pbtxt)
    files = {batch: ensemble_requests.perf_data(model, sizes, samples, batch,
                                                work / f"perf_data_b{batch}.json")
             for batch in dict.fromkeys(model["offline"]["batch_sizes"])}
    return files, source


def cache_warmup(run: dict, data_dir: Path | None):
    """(description, batches of the model's samples) sent before an ensemble's offline
    step measures (ensemble.requests.warmup_batches); (None, nothing) otherwise."""
    if not is_ensemble(run):
        return None, iter(())
    return ensemble_requests.warmup_batches(run["model"], data_dir)


def _perf_data_samples(run: dict, perf_data: Path) -> list[np.ndarray]:
    """The perf data's samples (one entry each) as arrays of the model's inputs."""
    entries = json.loads(Path(perf_data).read_text())["data"]
    return [np.stack([np.asarray(e[t["name"]]["content"], dtype=numpy_dtype(t["dtype"]))
                      .reshape(e[t["name"]]["shape"]) for e in entries])
            for t in run["model"]["inputs"]]


def scenario(repo: Path, scratch: Path, static_batching: bool, on_cpu: bool) -> Path:
    """The repository to serve for a scenario: `repo` itself, or a copy under `scratch`
    whose configs have no dynamic batcher (offline) or CPU instances (a stand-in node).
    The server loads what it serves at start and takes no load-time override; an
    ensemble's parts get the scenario too."""
    if not (static_batching or on_cpu):
        return repo
    return triton_repository.scenario_repository(repo, scratch, static_batching, on_cpu)


def served_parts(repo: Path, config_pbtxt: Path) -> dict[str, str]:
    """An ensemble's parts and the Triton backend serving each (empty for one model)."""
    return {part: triton_config.served_by(triton_config.read(
                triton_repository.config_path(repo, part)))
            for part in triton_config.parts(triton_config.read(config_pbtxt))}


def cache_report(metrics_text: str) -> dict:
    """The sparse model's lookup and cache-hit counters over the server's session, as a
    report entry; empty for a model without them."""
    counters = ensemble_metrics.cache_counters(metrics_text)
    return {"embedding_cache": counters} if counters else {}
