"""torch.compile at load time (the runner `torch-compile`): the exported program's module
(torch.export, FP32, CPU) on the device, in FP16 for an FP16 configuration, compiled in
the configuration's mode (`compile_mode`; reduce-overhead replays CUDA graphs).

Batches are padded to power-of-two buckets (as the CUDA-graph runner's), so the dynamic
batcher's batch sizes give a handful of shapes: the first call compiles, the first call of
each bucket records its CUDA graph (the warm-up of each step), later ones replay. A batch
of one is padded to two: torch.compile specialises a dimension of size 1, so batch 1 would
compile a second graph (on an H100, TFT: ~40 s in every process that serves it)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .aoti import for_device
from .base import Options
from .cudagraph import buckets
from .torchscript import TorchRunner


def compiled_buckets(max_batch_size: int) -> list[int]:
    """The CUDA-graph runner's buckets without 1 (a batch of one runs padded to two)."""
    return [b for b in buckets(max_batch_size) if b > 1] or [1]


class CompiledRunner(TorchRunner):
    def __init__(self, artifact: Path, options: Options):
        super().__init__(options)
        import torch._dynamo

        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        module, _ = for_device(artifact, options)
        # The batch dimension symbolic from the first call: one compile per process, which
        # Inductor's on-disk cache makes cheap for every later process (the servers'
        # instances, the next step); static shapes would compile each bucket anew (on an
        # H100, TFT: ~75 s a bucket, against ~12 s for the cached dynamic graph).
        self.model = torch.compile(module, mode=options.compile_mode, dynamic=True)
        self.mode = options.compile_mode
        self.aliased = "reduce-overhead" in options.compile_mode
        self.buckets = compiled_buckets(options.max_batch_size)
        self.first_calls: dict[int, float] = {}  # bucket -> seconds of its first call

    def _forward(self, tensors: list) -> tuple:
        torch = self.torch
        # On the device outside inference mode: ordinary tensors whichever way they came
        # (host arrays, packed upload, DLPack); an inference tensor fails dynamo's
        # dispatch-key guard and compiles the model a second time (seen on an H100).
        tensors = self.to_device(tensors)
        n = tensors[0].shape[0]
        bucket = next(b for b in self.buckets if b >= n)
        padded = [t if n == bucket else torch.cat([t, t.new_zeros((bucket - n, *t.shape[1:]))])
                  for t in tensors]
        first = bucket not in self.first_calls
        start = time.perf_counter()
        if self.aliased:
            # Each call a new generation of Inductor's CUDA-graph trees: the last call's
            # outputs were copied out (run_tensors, __call__), so the next bucket replays
            # its own graph from the tree's root, where a still-referenced output would make
            # the trees record a new graph below it (buckets alternate in online runs).
            torch.compiler.cudagraph_mark_step_begin()
        result = super()._forward(padded)
        if first:  # compile or CUDA-graph recording: said where a server logs it
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.first_calls[bucket] = time.perf_counter() - start
            print(f"torch.compile ({self.mode}): first call of batch bucket {bucket} took "
                  f"{self.first_calls[bucket]:.1f} s", file=sys.stderr, flush=True)
        return tuple(r[:n] for r in result)


def load(name: str, artifact: Path, options: Options) -> CompiledRunner:
    return CompiledRunner(artifact, options)
