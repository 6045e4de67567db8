"""The steps that need a running Triton: accuracy, offline and online performance.

Each step checks the device, starts its own server on the run's model repository, loads
the model, measures, writes its CSV plus a JSON report (settings and provenance), and
stops the server whatever happens.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from . import atomic, device, perf, plugins, provenance, repository, source, triton_runtime
from .server import TritonServer
from .tensors import batched, numpy_dtype

ACCURACY_COLUMNS = ["name", "kind", "triton", "native", "limit", "passed"]


def archive(*paths: Path) -> None:
    """Keep a dated copy of a finished measurement under history/: Snakemake deletes a
    job's old outputs when it re-runs it, and a failed re-run must not lose them."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for path in paths:
        dest = path.parent / "history" / f"{path.stem}-{stamp}{path.suffix}"
        dest.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, dest)


def runtime_for(run: dict) -> triton_runtime.Runtime:
    server = run["server"]
    if server["kind"] == "binary":
        return triton_runtime.prepare(server["binary"], server.get("backend_directory"))
    return triton_runtime.prepare()


@contextmanager
def served(run: dict, config_pbtxt: Path, server_log: Path, static_batching: bool = False):
    """A running server with the run's model loaded; yields (server, provenance)."""
    checked = device.check(run["gpu"], run["allow_gpu_mismatch"])
    runtime = runtime_for(run)
    cfg = run["server"]
    name = run["key"]["model"]
    with TritonServer(runtime, Path(config_pbtxt).parent.parent, server_log, cfg["ports"],
                      cfg["start_timeout_s"], cfg["load_timeout_s"]) as server:
        override = None
        if static_batching:
            override = repository.static_batching_override(repository.read_config(config_pbtxt))
        server.load(name, override)
        meta = httpclient.InferenceServerClient(server.http_url).get_server_metadata()
        yield server, provenance.collect(run, meta, checked, runtime.describe())


def infer_all(url: str, run: dict, inputs: list[np.ndarray], batch_size: int) -> list:
    """Outputs of the served model over `inputs` (gRPC at `url`), batch by batch."""
    model = run["model"]
    client = grpcclient.InferenceServerClient(url)
    wanted = [grpcclient.InferRequestedOutput(t["name"]) for t in model["outputs"]]

    def infer(arrays):
        request = []
        for spec, array in zip(model["inputs"], arrays):
            tensor = grpcclient.InferInput(spec["name"], list(array.shape), spec["dtype"])
            tensor.set_data_from_numpy(np.ascontiguousarray(array))
            request.append(tensor)
        result = client.infer(run["key"]["model"], request, outputs=wanted)
        return [result.as_numpy(t["name"]) for t in model["outputs"]]

    return batched(infer, inputs, batch_size)


def accuracy(run: dict, config_pbtxt: Path, eval_npz: Path, out_csv: Path, out_json: Path,
             server_log: Path) -> pd.DataFrame:
    model = run["model"]
    inputs, reference, targets = source.load_eval(model, eval_npz)
    with served(run, config_pbtxt, server_log) as (server, prov):
        outputs = infer_all(server.grpc_url, run, inputs, model["accuracy"]["batch_size"])
    plugin = plugins.load(model["plugin"])
    on_triton = plugin.evaluate(model["hparams"], outputs, targets)
    native = plugin.evaluate(model["hparams"], reference, targets)
    rows = [{"name": k, "kind": "metric", "triton": v, "native": native[k],
             "limit": None, "passed": None} for k, v in on_triton.items()]
    limit = model["accuracy"]["max_abs_deviation"][run["precision"]]
    for spec, got, ref in zip(model["outputs"], outputs, reference):
        dev = float(np.abs(got.astype(np.float64) - ref).max())
        rows.append({"name": f"max_abs_deviation:{spec['name']}", "kind": "deviation",
                     "triton": dev, "native": 0.0, "limit": limit,
                     "passed": bool(dev <= limit)})
    table = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    report = {"samples": len(inputs[0]), "split": model["data"]["split"], "provenance": prov}
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.to_csv(tmp_csv, index=False)
        tmp_json.write_text(json.dumps(report, indent=2))
    archive(out_csv, out_json)
    return table


def require_accurate(accuracy_csv: Path) -> None:
    table = pd.read_csv(accuracy_csv)
    failed = table[(table["kind"] == "deviation") & (table["passed"].astype(str) != "True")]
    if len(failed):
        rows = "; ".join(f"{r.name} = {r.triton:.3g} > {r.limit}" for r in failed.itertuples())
        raise ValueError(f"accuracy check {accuracy_csv} failed ({rows}); not benchmarking")


def performance(run: dict, scenario: str, config_pbtxt: Path, data_json: Path,
                out_csv: Path, out_json: Path, log_path: Path, server_log: Path) -> pd.DataFrame:
    rows = []
    work = out_csv.parent / f".{scenario}-work"
    work.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log, \
            served(run, config_pbtxt, server_log, static_batching=scenario == "offline") as (
                server, prov):
        inputs = _warmup_inputs(data_json, run)
        client_batches = {b for b, _ in perf.sweep(run, scenario)}
        for batch in sorted(client_batches):  # warm-up: each batch size once before measuring
            infer_all(server.grpc_url, run, [np.repeat(a, batch, axis=0) for a in inputs], batch)
        for batch, concurrency in perf.sweep(run, scenario):
            rows.append(perf.measure(run, scenario, server, batch, concurrency, data_json,
                                     work, log))
    table = perf.table(rows)
    report = {
        "scenario": scenario,
        "perf_analyzer_settings": {**run["perf"], **run["model"][scenario],
                                   "protocol": "grpc" if scenario == "offline" else "http",
                                   "shared_memory": "system" if scenario == "offline" else "none",
                                   "batching": "static" if scenario == "offline" else "dynamic"},
        "triton": run["model"]["triton"],
        "provenance": prov,
    }
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.round(4).to_csv(tmp_csv, index=False)
        tmp_json.write_text(json.dumps(report, indent=2))
    archive(out_csv, out_json)
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    return table


def _warmup_inputs(data_json: Path, run: dict) -> list[np.ndarray]:
    """The first sample of the perf data, as batch-1 arrays."""
    first = json.loads(Path(data_json).read_text())["data"][0]
    return [
        np.asarray(first[t["name"]]["content"], dtype=numpy_dtype(t["dtype"]))
        .reshape([1, *first[t["name"]]["shape"]])
        for t in run["model"]["inputs"]
    ]
