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
    static buffers, overwritten by the next replay. `stream`: the stream the model runs
    on where it is its own (ONNX Runtime's), captured there thread-locally. A capture that
    fails, or a replay that differs from a plain run, leaves the model run plainly (said
    once on stderr), as the C++ backend's engine does; `where_faster`: a bucket keeps its
    graph only where its replay, the batch copied in, beat a plain run of the batch at its
    capture (said on stderr), as the engine's `where_faster`."""

    def __init__(self, model, max_batch_size, stream=None, where_faster=False):
        self.model = model
        self.buckets = buckets(max_batch_size)
        self.graphs = {}
        self.plain = set()  # buckets whose graph did not pay
        self.stream = stream
        self.where_faster = where_faster
        self.refused = ""

    def _capture(self, bucket, example):
        import torch

        static_in = []
        for t in example:
            static_in.append(torch.zeros((bucket, *t.shape[1:]), dtype=t.dtype,
                                         device=t.device))
            static_in[-1][:len(t)].copy_(t)  # the batch's own rows: a model may read them
        stream = self.stream or torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm-up on a side stream, as capture requires
                self.model(*static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream,
                                  capture_error_mode="thread_local"):
                out = self.model(*static_in)
        except RuntimeError as error:
            return self._refuse(bucket, str(error).splitlines()[0])
        out = out if isinstance(out, (tuple, list)) else (out,)
        # checked on other rows than the warm-up's and the capture's (theirs reversed), into
        # poisoned outputs kept before the plain run: a graph that ran nothing passed on what
        # memory held from the warm-up (the C++ engine's, on an H100, 2026-12-07); an output
        # that is an input (an identity) keeps the input's rows
        inputs = {t.untyped_storage().data_ptr() for t in static_in}
        for t in static_in:
            t.copy_(t.flip(0))
        for t in out:
            if t.untyped_storage().data_ptr() not in inputs:
                t.fill_(float("nan") if t.is_floating_point() else -1)
        graph.replay()
        replayed = [t.clone() for t in out]
        if differs := difference(replayed, self.model(*static_in)):
            return self._refuse(bucket, differs)
        self.graphs[bucket] = (static_in, out, graph)
        return not self.where_faster or self._pays(bucket, example)

    def _pays(self, bucket, example) -> bool:
        """Whether the bucket's replay (the batch copied in) beats a plain run of the batch:
        the fastest of three rounds of five calls each, alternating."""
        import sys
        import time

        import torch

        def timed_ms(work):
            torch.cuda.current_stream().synchronize()
            start = time.perf_counter()
            for _ in range(5):
                work()
            torch.cuda.current_stream().synchronize()
            return (time.perf_counter() - start) * 1e3 / 5

        plain = replayed = float("inf")
        for _ in range(3):
            plain = min(plain, timed_ms(lambda: self.model(*example)))
            replayed = min(replayed, timed_ms(lambda: self._replay(bucket, example)))
        kept = replayed < plain
        print(f"deploybench: CUDA graph at batch bucket {bucket} (batch {len(example[0])}): "
              f"replay {replayed:.3f} ms, plain run {plain:.3f} ms: "
              + ("kept" if kept else "not kept, the bucket runs plainly"), file=sys.stderr)
        if not kept:
            self.plain.add(bucket)
            del self.graphs[bucket]
        return kept

    def _replay(self, bucket, tensors):
        static_in, static_out, graph = self.graphs[bucket]
        n = tensors[0].shape[0]
        for dst, src in zip(static_in, tensors):
            dst[:n].copy_(src)
        graph.replay()
        return tuple(o[:n] for o in static_out)

    def _refuse(self, bucket, why):
        import sys

        self.refused, self.graphs = why, {}
        print(f"deploybench: CUDA graphs refused at batch bucket {bucket}, the model runs "
              f"without them: {why}", file=sys.stderr)
        return False

    def __call__(self, *tensors):
        if self.refused:
            return self.model(*tensors)
        n = tensors[0].shape[0]
        bucket = next(b for b in self.buckets if b >= n)
        if bucket in self.plain or (bucket not in self.graphs
                                    and not self._capture(bucket, tensors)):
            return self.model(*tensors)
        return self._replay(bucket, tensors)


def difference(replayed, plain) -> str:
    """Where a replay's outputs differ from a plain run's by more than 1e-3 relative L2
    (or are not finite where those are): what a wrong graph shows; "" where none does."""
    plain = plain if isinstance(plain, (tuple, list)) else (plain,)
    if len(replayed) != len(plain):
        return "its replay gave another number of outputs"
    for i, (got, want) in enumerate(zip(replayed, plain)):
        want, got = want.double(), got.double()
        error = float((got - want).norm() / max(float(want.norm()), 1e-30))
        if not error <= 1e-3:
            return f"its replay differs from a plain run in output {i} (relative L2 {error:g})"
    return ""


def load(name: str, artifact: Path, options: Options) -> TorchScriptRunner:
    runner = TorchScriptRunner(artifact, options)
    if runner.device.type != "cuda":
        raise ValueError("runner torch-cudagraph needs a GPU instance")
    runner.model = CudaGraphs(runner.model, options.max_batch_size)
    runner.aliased = True
    return runner
