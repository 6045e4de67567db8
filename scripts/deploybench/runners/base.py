"""What every runner shares: its options, its interface and its output dtypes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class RunnerUnavailable(RuntimeError):
    """The engine a runner needs is not installed, or has no such device here."""


@dataclass(frozen=True)
class Options:
    """How to load (and convert for) a runner: the model's tensors, precision and device."""

    inputs: tuple[str, ...]          # input names, in the model's order
    outputs: tuple[str, ...] = ()    # output names, in the model's order
    precision: str = "fp32"          # fp32 | fp16
    device_id: int | None = None     # CUDA device; None: the CPU
    threads: int = 0                 # CPU threads of the engine (0: its default)
    max_batch_size: int = 1
    # Engine builds (TensorRT): per-sample input dims, the batch to optimise for, workspace.
    input_dims: tuple[tuple[int, ...], ...] = ()
    opt_batch_size: int = 1
    workspace_mb: int = 1024


class Runner:
    """list of numpy arrays (the model's inputs, in order) -> list of numpy outputs."""

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


def as_fp32(array: np.ndarray) -> np.ndarray:
    """FP16 outputs (an FP16 model's) as FP32, the dtype the configs declare; integer
    outputs (lengths, indices) unchanged."""
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32, copy=False)
    return array
