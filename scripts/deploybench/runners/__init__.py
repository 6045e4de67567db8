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

from .base import Options, Runner, RunnerUnavailable

__all__ = ["DEVICE_TENSORS", "MODULES", "Options", "Runner", "RunnerUnavailable", "convert", "load"]

# Runner name (deploybench.backends.Backend.runner) -> the module that implements it.
MODULES = {
    "onnxruntime": "onnxruntime",
    "onnxruntime-trt": "onnxruntime",
    "torch": "torchscript",
    "torch-cudagraph": "cudagraph",
    "tensorflow": "tensorflow",
    "tensorflow-trt": "tensorflow",
    "tensorrt": "tensorrt",
    "aoti": "aoti",
    "aoti-cudagraph": "aoti",
    "torch-compile": "torchcompile",
    "identity": "identity",  # zeros at no cost: the floor of serving (runners.identity)
}
# Runners that also take and give tensors in GPU memory (`run_tensors`): the served model
# hands them CUDA shared memory inputs as they arrive.
DEVICE_TENSORS = ("torch", "torch-cudagraph", "aoti", "aoti-cudagraph", "torch-compile",
                  "identity")


def _module(name: str):
    if name not in MODULES:
        raise ValueError(f"unknown runner '{name}'; valid: {', '.join(sorted(MODULES))}")
    return importlib.import_module(f".{MODULES[name]}", __name__)


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
