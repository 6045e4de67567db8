"""The identity runner: zeros of the model's outputs for any inputs, at no cost. Served by
the same model file over the same data path as a real runner, it measures what Triton and
the python backend cost by themselves (the `floor` step)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import NUMPY_DTYPES, Options, Runner
from .torchscript import torch_dtype


class IdentityRunner(Runner):
    def __init__(self, options: Options):
        self.outputs = [(tuple(d), NUMPY_DTYPES[t]) for d, t in
                        zip(options.output_dims, options.output_dtypes)]
        self.device = None
        if options.device_id is not None:  # device tensors out, as a GPU runner gives
            import torch

            self.torch = torch
            self.device = torch.device(f"cuda:{options.device_id}")

    def __call__(self, arrays):
        return [np.zeros((len(arrays[0]), *dims), dtype) for dims, dtype in self.outputs]

    def run_tensors(self, tensors: list) -> list:
        torch, n = self.torch, tensors[0].shape[0]
        return [torch.zeros((n, *dims), dtype=torch_dtype(dtype),
                            device=self.device) for dims, dtype in self.outputs]


def load(name: str, artifact: Path, options: Options) -> IdentityRunner:
    return IdentityRunner(options)
