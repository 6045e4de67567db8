"""The identity runner: zeros of the model's outputs for any inputs, at no cost. Served by
the same model file over the same data path as a real runner, it measures what Triton and
the python backend cost by themselves (the `floor` step)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Options, Runner

_NUMPY = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
          "INT64": np.int64, "UINT8": np.uint8, "FP16": np.float16, "FP32": np.float32,
          "FP64": np.float64}


class IdentityRunner(Runner):
    def __init__(self, options: Options):
        self.outputs = [(tuple(d), _NUMPY[t]) for d, t in
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
        return [torch.zeros((n, *dims), dtype=torch.from_numpy(np.zeros(0, dtype)).dtype,
                            device=self.device) for dims, dtype in self.outputs]


def load(name: str, artifact: Path, options: Options) -> IdentityRunner:
    return IdentityRunner(options)
