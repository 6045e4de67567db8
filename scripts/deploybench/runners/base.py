"""What every runner shares: its options, its interface and its output dtypes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Triton's data types as numpy's (the one table of them: deploybench.tensors reads it too).
NUMPY_DTYPES = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
                "INT64": np.int64, "UINT8": np.uint8, "FP16": np.float16,
                "FP32": np.float32, "FP64": np.float64}


class RunnerUnavailable(RuntimeError):
    """The engine a runner needs is not installed, or has no such device here."""


@dataclass(frozen=True)
class Options:
    """How to load (and convert for) a runner: the model's tensors, precision and device."""

    inputs: tuple[str, ...]          # input names, in the model's order
    outputs: tuple[str, ...] = ()    # output names, in the model's order
    precision: str = "fp32"          # fp32 | fp16 | a quantized one (quantization.SCHEMES)
    device_id: int | None = None     # CUDA device; None: the CPU
    threads: int = 0                 # CPU threads of the engine (0: its default)
    max_batch_size: int = 1
    # Per-sample dims and Triton dtypes of the inputs and outputs (engine builds, the
    # identity runner's zeros).
    input_dims: tuple[tuple[int, ...], ...] = ()
    output_dims: tuple[tuple[int, ...], ...] = ()
    output_dtypes: tuple[str, ...] = ()
    opt_batch_size: int = 1  # the batch a TensorRT engine is optimised for
    # TensorRT: one profile fixed at each of these batches (min = opt = max; per-batch
    # deployments) instead of one from 1 through opt to the max batch size
    fixed_batches: tuple[int, ...] = ()
    workspace_mb: int = 1024  # TensorRT builder workspace
    compile_mode: str = "default"  # torch.compile's mode (runner torch-compile)
    # ONNX Runtime on a GPU: CUDA graphs per batch bucket up to this batch, kept where they
    # pay (deployments.graph_batch, as the C++ backend's engine has them); 0: none
    cuda_graphs: int = 0


class Runner:
    """list of numpy arrays (the model's inputs, in order) -> list of numpy outputs.

    A torch runner on a GPU also runs device tensors (`run_tensors`): the served model
    hands it the inputs Triton placed in GPU memory (CUDA shared memory) and returns its
    outputs there, and the native step times it without host copies."""

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


def as_fp32(array: np.ndarray) -> np.ndarray:
    """FP16 outputs (an FP16 model's) as FP32, the dtype the configs declare; integer
    outputs (lengths, indices) unchanged."""
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32, copy=False)
    return array
