"""The steps that need a running Triton: accuracy, offline and online performance.

Each step checks the device, starts its own server on the run's model repository, loads
the model, measures, writes its CSV plus a JSON report (settings and provenance), and
stops the server whatever happens.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from . import (
    atomic,
    device,
    ensemble,
    perf,
    plugins,
    provenance,
    repository,
    source,
    triton_runtime,
)
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
    if server["kind"] == "container":
        return triton_runtime.container(server["image"], server.get("engine", "apptainer"),
                                        Path.cwd())
    return triton_runtime.prepare()


@contextmanager
def served(run: dict, config_pbtxt: Path, server_log: Path, static_batching: bool = False):
    """A running server with the run's model loaded; yields (server, provenance)."""
    checked = device.check(run["gpu"], run["allow_gpu_mismatch"])
    runtime = runtime_for(run)
    cfg = run["server"]
    name = run["key"]["model"]
    repo = Path(config_pbtxt).parent.parent
    # A CPU node standing in for a GPU key (allow_gpu_mismatch) serves on its CPU.
    on_cpu = checked["mismatch_allowed"] and not checked["devices"]
    config = repository.read_config(config_pbtxt)
    parts = ensemble.parts(config)
    override = repository.load_override(config, static_batching, on_cpu)
    with ExitStack() as stack:
        if parts and override:  # the parts load from the repository: a scenario copy
            scratch = stack.enter_context(
                tempfile.TemporaryDirectory(prefix=".scenario-", dir=repo.parent))
            repo = repository.scenario_repository(repo, Path(scratch) / "repository",
                                                  static_batching, on_cpu)
            override = None
        server = stack.enter_context(TritonServer(
            runtime, repo, server_log, cfg["ports"], cfg["start_timeout_s"],
            cfg["load_timeout_s"]))
        server.load(name, override)
        meta = httpclient.InferenceServerClient(server.http_url).get_server_metadata()
        described = {**runtime.describe(), "served_by": _served_by(config)}
        if parts:
            described["ensemble_parts"] = {
                part: _served_by(repository.read_config(repo / part / "config.pbtxt"))
                for part in parts}
        yield server, provenance.collect(run, meta, checked, described)


def _served_by(config) -> str:
    return config.backend or config.platform


def cache_report(server: TritonServer) -> dict:
    """The sparse model's lookup and cache-hit counters over the server's session (an
    ensemble's), as a report entry; empty for a model without them."""
    counters = ensemble.cache_counters(server.metrics())
    return {"embedding_cache": counters} if counters else {}


def infer_all(url: str, run: dict, inputs: list[np.ndarray], batch_size: int,
              served: list[str] | None = None) -> list:
    """Outputs of the served model over `inputs` (gRPC at `url`), batch by batch; only
    the inputs named in `served` (all when None) are sent."""
    model = run["model"]
    client = grpcclient.InferenceServerClient(url)
    wanted = [grpcclient.InferRequestedOutput(t["name"]) for t in model["outputs"]]

    def infer(arrays):
        request = []
        for spec, array in zip(model["inputs"], arrays):
            if served is not None and spec["name"] not in served:
                continue
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
        outputs = infer_all(server.grpc_url, run, inputs, model["accuracy"]["batch_size"],
                            repository.served_inputs(config_pbtxt))
        cache = cache_report(server)
    plugin = plugins.load(model["plugin"])
    on_triton = plugin.evaluate(model["hparams"], outputs, targets)
    native = plugin.evaluate(model["hparams"], reference, targets)
    rows = [{"name": k, "kind": "metric", "triton": v, "native": native[k],
             "limit": None, "passed": None} for k, v in on_triton.items()]
    limits = model["accuracy"]["max_abs_deviation"]
    for spec, got, ref in zip(model["outputs"], outputs, reference):
        limit = limits.get("outputs", {}).get(spec["name"], {}).get(run["precision"],
                                                                    limits[run["precision"]])
        dev = float(np.abs(got.astype(np.float64) - ref).max())
        rows.append({"name": f"max_abs_deviation:{spec['name']}", "kind": "deviation",
                     "triton": dev, "native": 0.0, "limit": limit,
                     "passed": bool(dev <= limit)})
        if np.issubdtype(got.dtype, np.integer):  # lengths, ids: share of exact samples
            same = (got.reshape(len(got), -1) == ref.reshape(len(ref), -1)).all(axis=1)
            rows.append({"name": f"agreement:{spec['name']}", "kind": "agreement",
                         "triton": float(same.mean()), "native": 1.0, "limit": None,
                         "passed": None})
    table = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    report = {"samples": len(inputs[0]), "split": model["data"]["split"], **cache,
              "provenance": prov}
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
        names = repository.served_inputs(config_pbtxt)
        data_json = _served_data(data_json, names, work)
        inputs = _warmup_inputs(data_json, run)
        client_batches = {b for b, _ in perf.sweep(run, scenario)}
        for batch in sorted(client_batches):  # warm-up: each batch size once before measuring
            infer_all(server.grpc_url, run, [np.repeat(a, batch, axis=0) for a in inputs],
                      batch, names)
        for batch, concurrency in perf.sweep(run, scenario):
            rows.append(perf.measure(run, scenario, server, batch, concurrency, data_json,
                                     work, log))
        cache = cache_report(server)
    table = perf.table(rows)
    report = {
        "scenario": scenario,
        "perf_analyzer_settings": {**run["perf"], **run["model"][scenario],
                                   "protocol": "grpc" if scenario == "offline" else "http",
                                   "shared_memory": "system" if scenario == "offline" else "none",
                                   "batching": "static" if scenario == "offline" else "dynamic"},
        "triton": run["model"]["triton"],
        **cache,
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


def _served_data(data_json: Path, names: list[str], work: Path) -> Path:
    """The perf data narrowed to the inputs the served config takes (a native ONNX
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
