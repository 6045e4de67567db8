"""A user's Triton model repository, served as it is (backend `repository`, the `artifact`
plug-in's format triton-repository): artifacts.of(run) answers with this module as it does
with deploybench.single for a model the pipeline converts. Its export is the user's model
folder, byte for byte; nothing converts it, no runner of ours runs it: the backend its
config.pbtxt names serves it, with that config's settings."""

from __future__ import annotations

from pathlib import Path

from . import single
from .triton import repository as triton_repository

AS_IS = ("a Triton model repository is served as it is, by the backend its config.pbtxt "
         "names: there is no conversion of it and no runner of ours")
# what perf_analyzer and the clients send: a single model's requests
request_encoder = single.request_encoder
request_shapes = single.request_shapes
request_data = single.request_data
cache_warmup = single.cache_warmup


def convert(run: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    raise ValueError(f"backend '{run['key']['backend']}' of '{run['key']['model']}': {AS_IS}")


def runner(converted: Path, run: dict):
    raise ValueError(f"backend '{run['key']['backend']}' of '{run['key']['model']}': {AS_IS} "
                     "to run in-process")


def repository(run: dict, exported: Path, out: Path, available: list[str]) -> str:
    """The user's model folder (its export) in the repository `out` as the model key;
    returns the backend that serves it."""
    out.mkdir(parents=True, exist_ok=True)
    return triton_repository.serve_as_is(exported, out, run["key"]["model"], available,
                                         on_gpu=run["gpu"]["kind"] == "gpu")
