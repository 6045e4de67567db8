"""In-process runners: one module per engine, behind one interface.

A runner loads a converted artifact and runs it: `runner(arrays) -> arrays`, numpy arrays
in the order of the model's inputs in, its outputs in their order out (floating outputs
as FP32, integer ones unchanged). The same runners serve a model in Triton's python
backend (the model repository bundles this package beside `served/python_model.py`) and
run it in-process for the conversion check and the native throughput, so the served and
the native numbers run the same code. A runner module may also convert an exported FP32
model for its engine and precision (`convert`), as the convert step asks.

This package imports nothing else of deploybench: it is copied into model repositories.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import NamedTuple

from .base import Options, Runner, RunnerUnavailable

__all__ = ["RUNNERS", "Facts", "Options", "Runner", "RunnerUnavailable", "convert", "load"]


class Facts(NamedTuple):
    """What the pipeline needs to know of a runner besides its module's code."""

    module: str  # the module of this package that implements it
    # it also takes and gives tensors in GPU memory (`run_tensors`): the served model hands
    # it CUDA shared memory inputs as they arrive
    device_tensors: bool = False
    # its conversion of an FP32 export is the cast to FP16 and nothing else: it serves an
    # FP16 export as it is
    casts_only: bool = False
    # its conversion builds an engine on the device (the step runs on the keyed GPU)
    builds_on_device: bool = False
    # the pipeline's C++ backend (triton_backend/) serves it too, in the server's process
    # (libtorch, ONNX Runtime's C API)
    in_cpp_backend: bool = False


# Runner name (deploybench.backends.Backend.runner) -> its facts, the one table of them.
# TensorRT builds its plan from either precision's export; ONNX Runtime's TensorRT
# provider applies FP16 at load.
RUNNERS = {
    "onnxruntime": Facts("onnxruntime", casts_only=True, in_cpp_backend=True),
    "onnxruntime-trt": Facts("onnxruntime"),
    "torch": Facts("torchscript", device_tensors=True, casts_only=True, in_cpp_backend=True),
    "torch-cudagraph": Facts("cudagraph", device_tensors=True, casts_only=True,
                             in_cpp_backend=True),
    "tensorflow": Facts("tensorflow"),
    "tensorflow-trt": Facts("tensorflow"),
    "tensorrt": Facts("tensorrt", builds_on_device=True),
    "aoti": Facts("aoti", device_tensors=True, in_cpp_backend=True),
    "aoti-cudagraph": Facts("aoti", device_tensors=True, in_cpp_backend=True),
    "torch-compile": Facts("torchcompile", device_tensors=True),
    # zeros at no cost: the floor of serving
    "identity": Facts("identity", device_tensors=True, in_cpp_backend=True),
}


def _module(name: str):
    if name not in RUNNERS:
        raise ValueError(f"unknown runner '{name}'; valid: {', '.join(sorted(RUNNERS))}")
    return importlib.import_module(f".{RUNNERS[name].module}", __name__)


def load(name: str, artifact: Path, options: Options) -> Runner:
    """The runner `name` over a converted artifact."""
    return _module(name).load(name, Path(artifact), options)


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """Write `out`: the exported FP32 model converted for runner `name` at
    `options.precision`. False when the runner serves the export as it is (FP32, or an
    engine that applies FP16 itself when it loads it): the caller copies it then."""
    module = _module(name)
    if not hasattr(module, "convert"):
        return False
    return module.convert(name, Path(exported), Path(out), options)
