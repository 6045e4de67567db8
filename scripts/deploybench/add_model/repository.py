"""A Triton model repository's model: its tensors and serving settings read from its
config.pbtxt with Triton's own schema (tritonclient's ModelConfig, protobuf's text
format), the one version it serves, the backend that serves it. Nothing of the folder
runs here; a python-backend model's model.py runs only in the server, and only where the
user said so (--trust-python)."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ..runners.base import NUMPY_DTYPES
from ..triton import config as triton_config
from ..triton.repository import CONFIG, served_version
from .base import Refused

PYTHON = "python"


def model_folder(path: Path) -> Path | None:
    """The model folder of `path`: itself where it holds a config.pbtxt, else its one
    subfolder that does (a repository of one model); None where neither."""
    if (path / CONFIG).is_file():
        return path
    models = sorted(p for p in path.iterdir() if (p / CONFIG).is_file())
    if len(models) > 1:
        raise Refused(f"repository '{path}' holds {len(models)} models "
                      f"({', '.join(p.name for p in models)}): name the one to add "
                      f"({path / models[0].name})")
    return models[0] if models else None


def _spec(tensor, what: str) -> dict:
    dtype = mc.DataType.Name(tensor.data_type).removeprefix("TYPE_")
    if dtype not in NUMPY_DTYPES:
        raise Refused(f"{what} '{tensor.name}' is {dtype}; valid: {', '.join(NUMPY_DTYPES)}")
    return {"name": tensor.name, "dtype": dtype, "dims": list(tensor.dims)}


def read(path: Path, trust_python: bool) -> tuple[list[dict], list[dict], dict]:
    """(inputs, outputs, facts) of the model folder `path`: facts are who serves it, its
    served version and the Triton settings it deploys with."""
    try:
        config = triton_config.read(path / CONFIG)
    except text_format.ParseError as err:
        raise Refused(f"'{path / CONFIG}' is not a Triton model config: {err}") from err
    served_by = triton_config.served_by(config)
    where = f"model '{config.name or path.name}' of '{path}'"
    if served_by == "ensemble":
        raise Refused(f"{where} is an ensemble, whose steps are other models: add-model "
                      "measures one model (add the ensemble's repository to a server and "
                      "measure it with server.kind remote)")
    if served_by == PYTHON and not trust_python:
        raise Refused(f"{where} is served by Triton's python backend: its model.py is Python "
                      "that the server would run, and the pipeline runs no code of the files "
                      "it is given unless told to (docs/security.md): add --trust-python to "
                      "measure it as it is")
    if config.max_batch_size < 1:
        raise Refused(f"{where} has max_batch_size {config.max_batch_size}: add-model takes "
                      "models that Triton batches (max_batch_size 1 or more), whose requests "
                      "perf_analyzer sends at each batch size")
    if not config.input or not config.output:
        missing = "inputs" if not config.input else "outputs"
        raise Refused(f"{where}: its config.pbtxt lists no {missing} (Triton's auto-complete "
                      "reads them from the model at load): list them in config.pbtxt")
    groups = config.instance_group
    batcher = config.dynamic_batching
    top = config.max_batch_size
    try:
        version = served_version(path, config).name
    except ValueError as err:
        raise Refused(str(err)) from err
    facts = {"served_by": served_by, "version": version,
             "triton": {"max_batch_size": top,
                        "instances": sum(g.count or 1 for g in groups) or 1,
                        "preferred_batch_sizes": [b for b in batcher.preferred_batch_size
                                                  if b <= top] or [top],
                        "max_queue_delay_us": int(batcher.max_queue_delay_microseconds)}}
    return ([_spec(t, "input") for t in config.input],
            [_spec(t, "output") for t in config.output], facts)
