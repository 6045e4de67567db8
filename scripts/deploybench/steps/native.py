"""Native throughput: the converted model in-process with the same runner, batch sizes and
precision as the offline scenario, without Triton. served/native is the serving overhead
the report shows."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts, atomic, device, locks, provenance, source_model
from ..tables import NATIVE_COLUMNS, THROUGHPUT


def native(spec: dict, converted: Path, eval_set: Path, out_csv: Path, out_json: Path,
           min_seconds: float = 2.0) -> None:
    checked = device.check(spec["gpu"], spec["allow_gpu_mismatch"])
    with locks.device_lock(device.measured_device(checked)) as held:
        table = _measure(spec, converted, eval_set, min_seconds)
    report = {"min_seconds": min_seconds,
              "provenance": {**provenance.collect(spec, device_check=checked),
                             "device_lock": held}}
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.to_csv(tmp_csv, index=False)
        tmp_json.write_text(json.dumps(report, indent=2))
    print(table.to_string(index=False))


def _measure(spec: dict, converted: Path, eval_set: Path, min_seconds: float) -> pd.DataFrame:
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
    return pd.DataFrame(rows, columns=NATIVE_COLUMNS).round(4)
