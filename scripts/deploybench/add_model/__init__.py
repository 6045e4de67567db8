"""A model config for a user's model (`deploybench add-model`, the `artifact` plug-in): its
tensors read from the file or folder (names, dtypes, shapes, a dynamic batch), what it
cannot tell asked for (TorchScript's inputs; an integer input's range), samples generated
from the specs or the user's checked, the backends that serve its format, and settings small
enough for a first run on a CPU. Reading a model runs none of its code: ONNX is a
protobuf; a `.pt2` package is deserialised by torch.export (no pickle); a TorchScript file
is loaded by TorchScript's own loader, which runs no Python; a SavedModel's signature is
read from its protobuf; a Triton model's config.pbtxt is parsed with Triton's schema."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..models.artifact import REPOSITORY, digest
from . import onnx_file, savedmodel, torch_files
from . import repository as triton_model
from .base import Refused
from .samples import check_data, generate_arrays, integer_ranges, parse_ranges

__all__ = ["BACKENDS", "FORMATS", "Refused", "model_config"]

FORMATS = {".onnx": "onnx", ".pt": "torchscript", ".ts": "torchscript",
           ".torchscript": "torchscript", ".pt2": "pt2"}
# The backends that serve each format (built from the file or folder itself)
BACKENDS = {"onnx": ["onnx"], "torchscript": ["ts-script"], "pt2": ["aoti", "torch-compile"],
            "savedmodel": ["tf-savedmodel"], REPOSITORY: ["repository"]}
FOLDERS = ("savedmodel", REPOSITORY)
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a config tensor's name (model.schema.yaml)
# The formats whose files name their tensors (a repository's source is matched by name)
NAMED = ("onnx", "savedmodel")


def format_of(path: Path, given: str | None) -> tuple[str, Path]:
    """The format of `path` (given, or told by its suffix or its folder's files), and the
    file or folder to add (a repository of one model: that model's folder)."""
    if given and given not in BACKENDS:
        raise Refused(f"format '{given}' is not one add-model reads; valid: "
                      f"{', '.join(BACKENDS)}")
    if path.is_dir():
        if savedmodel.is_savedmodel(path) and given in (None, "savedmodel"):
            return "savedmodel", path
        folder = triton_model.model_folder(path) if given in (None, REPOSITORY) else None
        if folder is None:
            raise Refused(f"'{path}' is a folder holding neither a SavedModel "
                          f"({' or '.join(savedmodel.FILES)}) nor a Triton model "
                          "(config.pbtxt, version folders)"
                          + (f", which format '{given}' needs" if given else ""))
        return REPOSITORY, folder
    if not path.is_file():
        raise Refused(f"'{path}' is not a file or folder")
    if given in FOLDERS:
        raise Refused(f"format '{given}' is a folder; '{path}' is a file")
    if given:
        return given, path
    if path.suffix not in FORMATS:
        raise Refused(f"'{path.name}': add-model cannot tell its format from '{path.suffix}'; "
                      f"name it (--format {'|'.join(BACKENDS)}) or use one of "
                      f"{', '.join(FORMATS)}, a SavedModel folder or a Triton model folder")
    return FORMATS[path.suffix], path


def _read(path: Path, fmt: str, inputs: list[str], ranges: dict,
          data: Path | None) -> tuple[list[dict], list[dict]]:
    """The tensors of a model file or SavedModel (a TorchScript file's inputs: the user's)."""
    if fmt == "onnx":
        return onnx_file.tensors(path)
    if fmt == "pt2":
        return torch_files.pt2_tensors(path)
    if fmt == "savedmodel":
        return savedmodel.tensors(path)
    ins = torch_files.parse_inputs(inputs)
    return torch_files.torchscript_tensors(path, ins, integer_ranges(ins, ranges, data))


def _source(given: Path, ins: list[dict], outs: list[dict], ranges: dict,
            data: Path | None) -> dict:
    """A repository's source model (--source): a model file or SavedModel of the same
    tensors, by name where its format names them, else in the config's order (TorchScript:
    the config's inputs)."""
    fmt, path = format_of(Path(given).resolve(), None)
    if fmt == REPOSITORY:
        raise Refused(f"--source '{given}' is a Triton model folder; a source model is a "
                      "model file or a SavedModel")
    given_inputs = [f"{s['name']}:{s['dtype']}:{','.join(map(str, s['dims']))}" for s in ins]
    found = _read(path, fmt, given_inputs if fmt == "torchscript" else [], ranges, data)
    named = fmt in NAMED
    for what, want, got in (("inputs", ins, found[0]), ("outputs", outs, found[1])):
        order = sorted if named else list
        if order(_key(s, named) for s in want) != order(_key(s, named) for s in got):
            raise Refused(f"--source '{given}' ({fmt}) has {what} {_listed(got)}; the "
                          f"repository's config has {_listed(want)}"
                          + ("" if fmt in NAMED else " (matched in order: the file does not "
                             "name them as the config does)"))
    return {"artifact": str(path), "format": fmt, "sha256": digest(path)}


def _key(spec: dict, named: bool) -> tuple:
    """What must agree between a source's tensor and the config's: name (where the source
    names its tensors, compared in any order), dtype and dims."""
    return (spec["name"], spec["dtype"], spec["dims"]) if named else (spec["dtype"],
                                                                        spec["dims"])


def _listed(specs: list[dict]) -> str:
    return ", ".join(f"{s['name']} {s['dtype']}{s['dims']}" for s in specs) or "none"


def model_config(name: str, path: Path, fmt: str | None = None, inputs: list[str] = (),
                 ranges: list[str] = (), data: Path | None = None, max_batch: int = 32,
                 samples: Path | None = None, p99_budget_ms: float = 100.0,
                 source: Path | None = None, trust_python: bool = False) -> dict:
    """The model config of a user's model file or folder (config/models/NAME.yaml). `data`:
    the user's samples (checked against the specs); otherwise generated ones are written to
    `samples` (an .npz beside the config). `p99_budget_ms`: the budget of its rate
    scenario, whose rates are fractions of the online sweep's peak, and of what to ship.
    A Triton repository's model: `source`, the model it serves, to compare with;
    `trust_python`: serve a python-backend model (its model.py runs in the server)."""
    if not p99_budget_ms > 0:
        raise Refused(f"--p99 {p99_budget_ms}: a budget of more than 0 ms")
    if max_batch < 1:
        raise Refused(f"--max-batch {max_batch}: a batch of one at least")
    fmt, path = format_of(Path(path).resolve(), fmt)
    if source is not None and fmt != REPOSITORY:
        raise Refused(f"--source is a Triton repository's source model; '{path.name}' is a "
                      f"{fmt} model, its own source")
    bounds = parse_ranges(list(ranges))
    triton, facts = {"max_batch_size": max_batch, "instances": 1,
                     "preferred_batch_sizes": [max_batch], "max_queue_delay_us": 100}, {}
    if fmt == REPOSITORY:
        ins, outs, facts = triton_model.read(path, trust_python)
        triton = facts.pop("triton")
        max_batch = min(max_batch, triton["max_batch_size"])
    else:
        ins, outs = _read(path, fmt, list(inputs), bounds, data)
    for spec in (*ins, *outs):
        if not NAME.match(spec["name"]):
            raise Refused(f"tensor '{spec['name']}' is not a name a model config takes "
                          f"({NAME.pattern}): rename it in the model")
    values = integer_ranges(ins, bounds, data)
    hparams = {"artifact": str(path), "format": fmt, "sha256": digest(path), "inputs": ins,
               "outputs": outs, **facts}
    if fmt == REPOSITORY:
        hparams["source"] = (_source(source, ins, outs, bounds, data)
                             if source is not None else None)
    if data is not None:
        check_data(Path(data), ins)
    else:
        arrays = generate_arrays(ins, values, 64, seed=0)
        with open(samples, "wb") as f:
            np.savez(f, **arrays)
    batches = sorted({1, max(1, max_batch // 4), max_batch})
    config = {
        "plugin": "artifact",
        "title": f"{name} ({fmt} {'folder' if fmt in FOLDERS else 'file'} {path.name})",
        "backends": BACKENDS[fmt],
        "hparams": hparams,
        "weights": {"checkpoint": None, "seed": 0},
        "data": {"path": str(Path(data if data is not None else samples).resolve()),
                 "split": "test", "samples": 64},
        "inputs": ins,
        "outputs": outs,
        "conversion": {"batch_size": min(8, max_batch),
                       "tolerance": {"fp32": {"atol": 1e-4, "rtol": 1e-3},
                                     "fp16": {"atol": 5e-2, "rtol": 5e-2}}},
        "accuracy": {"batch_size": min(8, max_batch),
                     "max_abs_deviation": {"fp32": 1e-4, "fp16": 5e-2}},
        "triton": triton,
        "offline": {"batch_sizes": batches, "measurement_request_count": 20},
        "online": {"batch_size": 1, "concurrency": [1, 2, 4], "measurement_request_count": 20},
        # up to the closed-loop peak: on a small machine a fast model's load generator
        # shares its cores, and a level it cannot send in 20 s counts as beyond the budget
        "rate": {"batch_size": 1, "rates_of_peak": [0.25, 0.5, 0.75, 1.0],
                 "distribution": "poisson", "p99_budget_ms": p99_budget_ms,
                 "bisection_steps": 1, "min_requests": 200, "min_window_ms": 1000,
                 "level_timeout_s": 20},
    }
    if fmt == REPOSITORY and source is None:  # nothing to compare its served outputs with
        del config["accuracy"]
    return config
