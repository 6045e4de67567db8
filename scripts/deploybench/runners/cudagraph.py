"""TorchScript replayed as CUDA graphs: the runner `torch-cudagraph` (converted as
`torch` converts)."""

from __future__ import annotations

from pathlib import Path

from .base import Options
from .torchscript import TorchScriptRunner, convert

__all__ = ["CudaGraphs", "buckets", "convert", "load"]


def buckets(max_batch_size: int) -> list[int]:
    """Powers of two up to the max batch size (and it): the batch sizes a padded batch
    takes, so a model sees a handful of shapes whatever batches the batcher forms."""
    return sorted({min(2**i, max_batch_size) for i in range(32)
                   if 2 ** (i - 1) < max_batch_size})


class CudaGraphs:
    """Replays one CUDA graph per batch bucket: a batch is padded to its bucket, so any
    batch size the dynamic batcher forms reuses a captured graph, and a replay costs one
    launch instead of hundreds of kernel launches. Outputs are views of the graph's
    static buffers, overwritten by the next replay."""

    def __init__(self, model, max_batch_size):
        self.model = model
        self.buckets = buckets(max_batch_size)
        self.graphs = {}

    def _capture(self, bucket, example):
        import torch

        static_in = [torch.zeros((bucket, *t.shape[1:]), dtype=t.dtype, device=t.device)
                     for t in example]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm-up on a side stream, as capture requires
                self.model(*static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = self.model(*static_in)
        out = out if isinstance(out, (tuple, list)) else (out,)
        self.graphs[bucket] = (static_in, out, graph)

    def __call__(self, *tensors):
        n = tensors[0].shape[0]
        bucket = next(b for b in self.buckets if b >= n)
        if bucket not in self.graphs:
            self._capture(bucket, tensors)
        static_in, static_out, graph = self.graphs[bucket]
        for dst, src in zip(static_in, tensors):
            dst[:n].copy_(src)
        graph.replay()
        return tuple(o[:n] for o in static_out)


def load(name: str, artifact: Path, options: Options) -> TorchScriptRunner:
    runner = TorchScriptRunner(artifact, options)
    if runner.device.type != "cuda":
        raise ValueError("runner torch-cudagraph needs a GPU instance")
    runner.model = CudaGraphs(runner.model, options.max_batch_size)
    runner.aliased = True
    return runner
