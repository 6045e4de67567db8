"""Native throughput: the converted model in-process with the same runner, batch sizes and
precision as the offline scenario, without Triton. served/native is the serving overhead
the report shows.

Two figures per batch: with host arrays in and out (what the python backend's runner does
with system shared memory), and, for a torch runner on a GPU, with the inputs already on
the device and the outputs left there (what CUDA shared memory lets it do; the compute
limit). The first call of each batch size (a compile, a CUDA graph's capture) is timed
apart and recorded in native.json. Telemetry (this process; the GPU) covers each batch's
host-array timing, the figure served/native divides by."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts
from ..measurement import device, provenance, telemetry
from ..measurement.host_load import HostLoad
from ..records import atomic, formats
from ..records.tables import DEVICE_THROUGHPUT, NATIVE_COLUMNS, THROUGHPUT
from ..source import model as source_model
from ..sweeps import record


def native(spec: dict, converted: Path, eval_set: Path, out_csv: Path, out_json: Path) -> None:
    min_seconds = spec["native"]["min_seconds"]
    with device.claim(spec) as claimed, HostLoad(claimed.device) as load:
        table, first_calls, usage, how = _measure(spec, converted, eval_set, min_seconds,
                                                  claimed.device)
    claimed.held.record["used_until"] = time.time()  # the lock goes with the step
    report = {"min_seconds": min_seconds, "first_call_s": first_calls, **how,
              "host_load": load.result, "telemetry": usage,
              "provenance": {**provenance.collect(spec, device_check=claimed.checked),
                             "device_lock": claimed.held.record}}
    claimed.held.verify()  # no result where another run may have measured beside it
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.to_csv(tmp_csv, index=False)
        tmp_json.write_text(formats.text(report))
    record.archive(out_csv, out_json)  # the baseline of the next one's regression report
    print(table.to_string(index=False))


def _timed(call, min_seconds: float) -> tuple[float, int]:
    """Median seconds of `call` over at least min_seconds and ten calls, and their count."""
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < min_seconds or len(times) < 10:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times)


def _measure(spec: dict, converted: Path, eval_set: Path, min_seconds: float,
             measured: str) -> tuple[pd.DataFrame, dict, list[dict], dict]:
    model = spec["model"]
    inputs, _, _ = source_model.load_eval(model, eval_set)
    infer = artifacts.of(spec).runner(converted, spec)
    on_device = hasattr(infer, "run_tensors") and getattr(infer, "device", None) is not None \
        and infer.device.type == "cuda"
    rows, first_calls, usage = [], {}, []
    # an ensemble's samples made into its request first, outside the timing, as its clients
    # make them before they send it (ensemble.requests): timed is the request's path
    prepare = getattr(infer, "prepare", None)
    run = infer.run_request if prepare else infer
    for batch in model["offline"]["batch_sizes"]:
        index = np.arange(batch) % len(inputs[0])  # real samples, repeated up to the batch
        arrays = [np.ascontiguousarray(a[index]) for a in inputs]
        sent = prepare(arrays) if prepare else arrays
        t0 = time.perf_counter()
        run(sent)  # returns host arrays: the device work is finished
        first_calls[batch] = round(time.perf_counter() - t0, 4)
        for _ in range(4):  # warm-up
            run(sent)
        with telemetry.Telemetry(measured) as sampled:
            median, iterations = _timed(lambda sent=sent: run(sent), min_seconds)
        usage.append({"Batch": batch, **sampled.result})
        row = {"Batch": batch, THROUGHPUT: batch / median,
               "median latency (ms)": median * 1e3, "iterations": iterations}
        if on_device:
            row |= _device_resident(infer, arrays, batch, min_seconds)
        rows.append(row)
    table = telemetry.with_columns(pd.DataFrame(rows, columns=NATIVE_COLUMNS), usage)
    # an ensemble's: where its request's path starts, and the store its lookups went through
    # (the pipeline's python store, which the served figure's may not be)
    how = {"timed_from": "request", "sparse_store": infer.sparse.describe()} if prepare else {}
    return table.round(4), first_calls, usage, how


def _device_resident(infer, arrays: list, batch: int, min_seconds: float) -> dict:
    torch = infer.torch
    tensors = infer.to_device([torch.from_numpy(a) for a in arrays])

    def call():
        infer.run_tensors(tensors)
        torch.cuda.synchronize(infer.device)

    for _ in range(5):
        call()
    median, _ = _timed(call, min_seconds)
    return {DEVICE_THROUGHPUT: batch / median,
            "device-resident median latency (ms)": median * 1e3}
