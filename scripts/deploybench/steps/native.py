"""Native throughput: the converted model in-process with the same runner, batch sizes and
precision as the offline scenario, without Triton. served/native is the serving overhead
the report shows."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts, atomic, device, source_model
from ..tables import NATIVE_COLUMNS, THROUGHPUT


def native(spec: dict, converted: Path, eval_set: Path, out: Path,
           min_seconds: float = 2.0) -> None:
    device.check(spec["gpu"], spec["allow_gpu_mismatch"])
    model = spec["model"]
    inputs, _, _ = source_model.load_eval(model, eval_set)
    infer = artifacts.runner(converted, spec)
    rows = []
    for batch in model["offline"]["batch_sizes"]:
        index = np.arange(batch) % len(inputs[0])  # real samples, repeated up to the batch
        arrays = [np.ascontiguousarray(a[index]) for a in inputs]
        for _ in range(5):  # warm-up (and CUDA graph capture)
            infer(arrays)
        times, start = [], time.perf_counter()
        while time.perf_counter() - start < min_seconds or len(times) < 10:
            t0 = time.perf_counter()
            infer(arrays)  # returns host arrays: the device work is finished
            times.append(time.perf_counter() - t0)
        median = statistics.median(times)
        rows.append({"Batch": batch, THROUGHPUT: batch / median,
                     "median latency (ms)": median * 1e3, "iterations": len(times)})
    table = pd.DataFrame(rows, columns=NATIVE_COLUMNS).round(4)
    with atomic.output(out) as tmp:
        table.to_csv(tmp, index=False)
    print(table.to_string(index=False))
