"""A run's artifacts, single model, ensemble or a user's repository: the one place that
tells them apart.

The steps ask `of(run)` for the module that converts, runs in-process, writes the model
repository and shapes the requests of a run: a run whose backend has a `dense` key
(hps-*) is a sparse/dense ensemble (deploybench.ensemble.model), a user's repository
(backend `repository`) is served as it is (deploybench.repository_model), any other a single
model (deploybench.single); and here what to export and how to serve a scenario.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from . import repository_model, single
from .backends import is_ensemble, served_as_is
from .ensemble import artifact as ensemble_artifact
from .ensemble import metrics as ensemble_metrics
from .ensemble import model as ensemble_model
from .ensemble import parts as ensemble_parts
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


def of(run: dict) -> ModuleType:
    """What builds and serves the run, chosen here once: deploybench.single or
    deploybench.ensemble.model, which have the same functions: `convert(run, exported,
    out, sparse=None)`, `runner(converted, run)`, `repository(run, converted, out,
    available)`, and the requests: `request_encoder(run, config_pbtxt)` (how a client
    sends a batch of samples: None, as they are), `request_shapes(run, batch)` (where the
    batch is inside the tensors), `request_data(run, config_pbtxt, perf_data, data_dir,
    work)` (perf_analyzer's --input-data per batch, and where its samples came from) and
    `cache_warmup(run, data_dir)` (what is sent before a measurement). A user's Triton
    repository (deploybench.repository_model) is served as it is: it neither converts nor
    runs in-process."""
    if served_as_is(run):
        return repository_model
    return ensemble_model if is_ensemble(run) else single


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


def engines(repo: Path, config_pbtxt: Path) -> dict[str, str]:
    """The engine of each model of ours a configuration serves (an ensemble: each part's):
    model -> runner (torch, onnxruntime, embeddings, ...)."""
    config = triton_config.read(config_pbtxt)
    names = triton_config.parts(config) or [config.name]
    found = {name: triton_config.engine(triton_config.read(
        triton_repository.config_path(repo, name))) for name in names}
    return {name: engine for name, engine in found.items() if engine}


def cache_report(metrics_text: str) -> dict:
    """The sparse model's lookup and cache-hit counters over the server's session, as a
    report entry; empty for a model without them."""
    counters = ensemble_metrics.cache_counters(metrics_text)
    return {"embedding_cache": counters} if counters else {}
