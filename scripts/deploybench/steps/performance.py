"""Offline and online performance of a deployment, measured by perf_analyzer on Triton.

Offline (the references' static batching): gRPC, system shared memory, concurrency 1, one
perf_analyzer call per batch size, the model loaded without its dynamic batcher. Online:
HTTP, dynamic batching, one call per concurrency level at the online batch size.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from .. import atomic, serving
from ..tables import require_accurate
from ..tensors import numpy_dtype
from ..triton import config as triton_config
from ..triton import perf_analyzer
from ..triton import repository as triton_repository
from ..triton.client import infer_all


def offline(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
            out_json: Path, perf_log: Path, server_log: Path) -> None:
    _measure(spec, "offline", repository, perf_data, accuracy, out_csv, out_json, perf_log,
             server_log)


def online(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
           out_json: Path, perf_log: Path, server_log: Path) -> None:
    _measure(spec, "online", repository, perf_data, accuracy, out_csv, out_json, perf_log,
             server_log)


def _measure(spec: dict, scenario: str, repository: Path, perf_data: Path, accuracy: Path,
             out_csv: Path, out_json: Path, perf_log: Path, server_log: Path) -> None:
    require_accurate(accuracy)
    work = out_csv.parent / f".{scenario}-work"  # perf_analyzer's CSVs, one per row
    work.mkdir(parents=True, exist_ok=True)
    try:
        _measure_in(spec, scenario, repository, perf_data, out_csv, out_json, perf_log,
                    server_log, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _measure_in(spec: dict, scenario: str, repository: Path, perf_data: Path, out_csv: Path,
                out_json: Path, perf_log: Path, server_log: Path, work: Path) -> None:
    config_pbtxt = triton_repository.config_path(repository, spec["key"]["model"])
    rows = []
    with open(perf_log, "w") as log, \
            serving.served(spec, config_pbtxt, server_log,
                           static_batching=scenario == "offline") as (server, prov):
        names = triton_config.served_inputs(config_pbtxt)
        data_json = _served_data(perf_data, names, work)
        inputs = _warmup_inputs(data_json, spec)
        sweep = perf_analyzer.sweep(spec, scenario)
        for batch in sorted({b for b, _ in sweep}):  # warm-up: each batch size once
            infer_all(server.grpc_url, spec, [np.repeat(a, batch, axis=0) for a in inputs],
                      batch, names)
        for batch, concurrency in sweep:
            rows.append(perf_analyzer.measure(spec, scenario, server, batch, concurrency,
                                              data_json, work, log))
        cache = serving.cache_report(server)
    table = perf_analyzer.table(rows)
    report = {
        "scenario": scenario,
        "perf_analyzer_settings": {**spec["perf"], **spec["model"][scenario],
                                   "protocol": "grpc" if scenario == "offline" else "http",
                                   "shared_memory": "system" if scenario == "offline" else "none",
                                   "batching": "static" if scenario == "offline" else "dynamic"},
        "triton": spec["model"]["triton"],
        **cache,
        "provenance": prov,
    }
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.round(4).to_csv(tmp_csv, index=False)
        tmp_json.write_text(json.dumps(report, indent=2))
    serving.archive(out_csv, out_json)
    print(table.to_string(index=False))


def _served_data(data_json: Path, names: list[str], work: Path) -> Path:
    """The perf data narrowed to the inputs the served config takes (an onnxruntime
    config lists only the graph's inputs); the file itself when it takes them all."""
    data = json.loads(Path(data_json).read_text())
    if all(set(entry) <= set(names) for entry in data["data"]):
        return data_json
    narrowed = work / "perf_data.json"
    narrowed.write_text(json.dumps(
        {"data": [{k: v for k, v in entry.items() if k in names} for entry in data["data"]]}))
    return narrowed


def _warmup_inputs(data_json: Path, run: dict) -> list[np.ndarray]:
    """The first sample of the perf data, as batch-1 arrays (a zero-size placeholder for
    an input the served config does not take: infer_all skips it)."""
    first = json.loads(Path(data_json).read_text())["data"][0]
    return [
        np.asarray(first[t["name"]]["content"], dtype=numpy_dtype(t["dtype"]))
        .reshape([1, *first[t["name"]]["shape"]])
        if t["name"] in first else np.zeros((1, 0))
        for t in run["model"]["inputs"]
    ]
