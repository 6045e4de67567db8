"""Native in-process throughput of the converted model: the same runner, batch sizes
and precision as the offline scenario, without Triton. served / native is the serving
overhead the report shows."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import atomic, device, runtimes, source

COLUMNS = ["Batch", "Inferences/Second", "median latency (ms)", "iterations"]


def measure(run: dict, converted: Path, eval_npz: Path, out: Path,
            min_seconds: float = 2.0) -> pd.DataFrame:
    checked = device.check(run["gpu"], run["allow_gpu_mismatch"])
    model = run["model"]
    inputs, _, _ = source.load_eval(model, eval_npz)
    infer = runtimes.load(converted, run)
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
        rows.append({"Batch": batch, "Inferences/Second": batch / median,
                     "median latency (ms)": median * 1e3, "iterations": len(times)})
    table = pd.DataFrame(rows, columns=COLUMNS).round(4)
    table.attrs["device"] = checked
    with atomic.output(out) as tmp:
        table.to_csv(tmp, index=False)
    return table
