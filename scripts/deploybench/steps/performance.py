"""Offline and online performance of a deployment, measured by perf_analyzer on Triton.

Offline (the references' static batching): concurrency 1, one perf_analyzer call per batch
size, the model loaded without its dynamic batcher. Online: dynamic batching, one call per
concurrency level at the online batch size. Protocol, shared memory, windows and warm-up
as the model's reference document ran them (deploybench.triton.perf_analyzer).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts, atomic, deployments, serving, tail
from ..backends import export_precision
from ..measurement import telemetry
from ..measurement.host_load import HostLoad
from ..measurement.progress import Progress
from ..measurement.repeats import median_run, spread
from ..run_facts import online_refusal
from ..tables import (
    SERVED_BY,
    SHARED_MEMORY,
    TAIL_COLUMNS,
    THROUGHPUT,
    require_accurate,
    tail_row,
)
from ..tensors import numpy_dtype
from ..triton import config as triton_config
from ..triton import cpp_backend, install, perf_analyzer
from ..triton import repository as triton_repository
from ..triton.client import send_all, warm_up


def offline(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
            out_json: Path, perf_log: Path, server_log: Path,
            data: Path | list = ()) -> None:
    """`data`: the dataset an ensemble's requests and cache warm-up are drawn from (none
    for a single model)."""
    require_accurate(accuracy)
    _measure(spec, "offline", repository, perf_analyzer.sweep(spec, "offline"), perf_data,
             out_csv, out_json, perf_log, server_log, requests=True, data_dir=data or None)


def online(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
           out_json: Path, perf_log: Path, server_log: Path) -> None:
    refused = online_refusal(spec)
    if refused:
        raise ValueError(refused)
    require_accurate(accuracy)
    _measure(spec, "online", repository, perf_analyzer.sweep(spec, "online"), perf_data,
             out_csv, out_json, perf_log, server_log)


def floor(spec: dict, perf_data: Path, out_csv: Path, out_json: Path, perf_log: Path,
          server_log: Path) -> None:
    """The offline scenario's smallest and largest batch, in each of its shared-memory
    modes, served by an identity model with the configuration's tensors (zeros, at no
    cost), once by each backend of ours the server has (the python backend, and the
    pipeline's C++ backend where it was built): what Triton and each of them cost by
    themselves on this data path, side by side in one server."""
    batches = spec["model"]["offline"]["batch_sizes"]
    name = spec["key"]["model"]
    available = install.for_server(spec["server"]).backends
    models = {b: name if b == "python" else f"{name}-{b}"
              for b in ("python", cpp_backend.NAME) if b in available}
    # one identity model with the configured max batch, whatever the deployments
    sweep = [row._replace(model=model) for model in models.values()
             for row in perf_analyzer.sweep(spec, "offline")
             if row.batch in (min(batches), max(batches))]
    # No reference warm-up run: an identity model has nothing to compile or capture (the
    # server's warm-up requests still run), and FastPitch's (6 windows of 10 s, run to
    # stability) kept its floor past a 10-minute call on the H100; floor.json records it.
    offline = {**spec["model"]["offline"], "warmup_windows": 0}
    spec = {**spec, "model": {**spec["model"], "offline": offline}}
    scratch = out_csv.parent / ".floor-repository"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        for backend, model in models.items():
            triton_repository.create_floor(
                spec, triton_repository.config_path(scratch, model), backend)
        _measure(spec, "offline", scratch, sweep, perf_data, out_csv, out_json, perf_log,
                 server_log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _measure(spec: dict, scenario: str, repository: Path, sweep: list, perf_data: Path,
             out_csv: Path, out_json: Path, perf_log: Path, server_log: Path,
             requests: bool = False, data_dir: Path | None = None) -> None:
    """`requests`: each row's request as the configuration's model takes it (an
    ensemble's flattened batch: _requests, after its cache warm-up); the floor's
    identity model takes samples."""
    work = out_csv.parent / f".{out_csv.stem}-work"  # perf_analyzer's CSVs, one per row
    work.mkdir(parents=True, exist_ok=True)
    extra = {}
    try:
        if requests:
            sweep, extra = _requests(spec, repository, sweep, perf_data, data_dir, work)
        _measure_in(spec, scenario, repository, sweep, perf_data, out_csv, out_json,
                    perf_log, server_log, work, extra, data_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _requests(spec: dict, repository: Path, sweep: list, perf_data: Path,
              data_dir: Path | None, work: Path) -> tuple[list, dict]:
    """The rows of a model that takes the batch inside its tensors (an ensemble) with
    their request's shapes and data (a file per batch), and where its samples came from
    (for the JSON); the sweep as it is otherwise."""
    built = artifacts.of(spec)
    files, source = built.request_data(
        spec, triton_repository.config_path(repository, sweep[0].model), perf_data,
        data_dir, work)
    if not files:
        return sweep, {}
    rows = [row._replace(shapes=tuple((k, tuple(v)) for k, v in
                                      built.request_shapes(spec, row.batch).items()),
                         data=str(files[row.batch])) for row in sweep]
    return rows, {"request_samples": source}


def _cache_warmup(spec: dict, server, config_pbtxt: Path, data_dir: Path | None,
                  name: str) -> dict:
    """An ensemble's cache warm-up before it is measured (artifacts.of(run).cache_warmup), its
    outputs discarded; what it sent, for the JSON (empty: none)."""
    described, batches = artifacts.of(spec).cache_warmup(spec, data_dir)
    if not described:
        return {}
    start = time.perf_counter()
    send_all(server.grpc_url, spec, batches, triton_config.served_inputs(config_pbtxt),
             server.served_name(name), artifacts.of(spec).request_encoder(spec, config_pbtxt),
             server.version)
    seconds = round(time.perf_counter() - start, 3)
    print(f"cache warm-up: {described['samples']} training samples in "
          f"{described['requests']} requests, {seconds} s")
    return {"cache_warmup": {**described, "seconds": seconds}}


def _measure_in(spec: dict, scenario: str, repository: Path, sweep: list, perf_data: Path,
                out_csv: Path, out_json: Path, perf_log: Path, server_log: Path,
                work: Path, extra: dict, data_dir: Path | None) -> None:
    config_pbtxt = triton_repository.config_path(repository, sweep[0].model)
    rows, loads, noise, usage, served, requests, tails, formed = [], [], [], [], [], [], [], []
    with open(perf_log, "w") as log, \
            warmed_server(spec, scenario, config_pbtxt, sweep, perf_data, server_log,
                          work) as (server, prov, data_json):
        if sweep[0].shapes:  # an ensemble: its cache warmed as the seed's was
            extra |= _cache_warmup(spec, server, config_pbtxt, data_dir, sweep[0].model)
        perf_analyzer.warm_up(spec, scenario, server, sweep, data_json, work, log)
        levels = Progress(f"{out_csv.stem} ({spec['key']['model']})", len(sweep))
        repeats = spec["perf"].get("repeats", 1)
        for row in sweep:
            level = {"Batch": row.batch, "Concurrency": row.concurrency,
                     SHARED_MEMORY: row.shared_memory}
            served.append({**level, **_deployment(repository, row.model, prov["server"])})
            # the telemetry's NVML session is open around the host load's GPU queries
            # online: every request's tail (one run a level: the export is that run's)
            export = work / "export.json" if scenario == "online" and repeats == 1 else None
            before = serving.executions_by_batch(server, row.model) if scenario == "online" else {}
            with telemetry.Telemetry(prov["device"], server_pids=server.pids) as sampled, \
                    HostLoad(prov["device"]) as load:
                runs = [perf_analyzer.measure(spec, scenario, server, row, data_json, work,
                                              log, export=export) for _ in range(repeats)]
                if export:
                    tails.append({**level, **_tail(spec, server, row, data_json, work, log,
                                                   export, runs)})
            if scenario == "online":  # what the dynamic batcher made of the level's requests
                formed.append({**level, "executions_by_batch": serving.formed_since(
                    server, row.model, before)})
            rows.append({**median_run(runs), SERVED_BY: served[-1]["served_by"]})
            requests.append({**level, perf_analyzer.REQUESTS: rows[-1][perf_analyzer.REQUESTS],
                             "samples_per_request": row.batch,
                             "request_shapes": dict(row.shapes) or None})
            loads.append({**level, **serving.interference(server, runs, load.result)})
            usage.append({**level, **sampled.result})
            if repeats > 1:
                noise.append({**level, **spread([r[THROUGHPUT] for r in runs],
                                                 spec["perf"]["stability_percentage"])})
            # the deployment where a configuration has several (deploybench.deployments)
            deployment = f", model {row.model}" if row.model != spec["key"]["model"] else ""
            levels.done(f"batch {row.batch}, concurrency {row.concurrency}, "
                        f"{row.shared_memory} shared memory{deployment}")
        cache = serving.cache_report(server)
    table = telemetry.with_columns(perf_analyzer.table(rows), usage)
    if tails:
        table = pd.concat([table, tail_columns(tails, table.index)], axis=1)
    report = {
        "scenario": scenario,
        "perf_analyzer_settings": {**spec["perf"], **spec["model"][scenario],
                                   **dict(zip(("measurement_mode", "measurement_interval_ms",
                                               "measurement_request_count"),
                                              perf_analyzer.window(spec, scenario))),
                                   "protocol": perf_analyzer.protocol(spec, scenario),
                                   "shared_memory": sorted({row.shared_memory for row in sweep}),
                                   "batching": _batching(scenario, prov["server"])},
        "triton": spec["model"]["triton"],
        "export_precision": export_precision(spec),  # what the model reports show
        "deployments": served,  # the Triton model (and its max batch) of each row
        # each row's requests: inferences/second is samples_per_request x requests/s
        "requests": requests,
        **extra,  # an ensemble's: its requests' samples, its cache warm-up
        **cache,
        "host_load": loads,
        "telemetry": usage,
        **({"repeats": noise} if noise else {}),
        **({"tail": tails} if tails else {}),  # every request's percentiles, per level
        **({"batches_formed": formed} if formed else {}),
        "provenance": prov,
    }
    write(table, report, out_csv, out_json)


LENGTHENINGS = 3  # runs of a level with longer windows, at most, for perf.min_* settings


def _tail(spec: dict, server, row, data_json: Path, work: Path, log, export: Path,
          runs: list) -> dict:
    """An online level's every-request tail (deploybench.tail). Where its kept windows held
    fewer than perf.min_requests requests or spanned less than perf.min_duration_s, the
    level is measured again with longer windows (up to LENGTHENINGS times), and that run
    replaces it in `runs`: the row and its tail are one run's."""
    found, scale = tail.summary(export), 1
    for _ in range(LENGTHENINGS):
        longer = _lengthened(spec, found, scale)
        if not longer:
            break
        scale = longer
        runs[:] = [perf_analyzer.measure(spec, "online", server, row, data_json, work, log,
                                         export=export, scale=scale)]
        found = tail.summary(export)
    return found | ({"windows_lengthened": scale} if scale > 1 else {})


def _lengthened(spec: dict, found: dict, scale: int) -> int:
    """The window scale that gives the kept windows perf.min_requests requests and
    perf.min_duration_s seconds at the rate `found` measured, a quarter more (0: they
    have them). Time windows grow with the scale; count windows by their count, since
    perf_analyzer measures one for a second at least whatever it counts."""
    perf = spec["perf"]
    need_requests, need_s = perf.get("min_requests", 0), perf.get("min_duration_s", 0)
    if found["requests"] >= need_requests and found["seconds"] >= need_s:
        return 0
    rate = found["requests"] / max(found["seconds"], 1e-9)
    wanted = 1.25 * max(need_requests, rate * need_s)  # requests over the kept windows
    mode, _, count = perf_analyzer.window(spec, "online")
    if mode == "time_windows":
        return max(scale + 1, math.ceil(scale * wanted / found["requests"]))
    return max(scale + 1, math.ceil(wanted / tail.KEPT_WINDOWS / count))


def tail_columns(tails: list[dict], index) -> pd.DataFrame:
    """The levels' tails (tail.summary, in the table's row order) as online.csv's columns
    beside perf_analyzer's: requests, seconds, every percentile and p99's interval."""
    rows = [tail_row(t["requests"], t["seconds"], t["percentiles_ms"]) for t in tails]
    return pd.DataFrame(rows, columns=TAIL_COLUMNS, index=index)


def write(table: pd.DataFrame, report: dict, out_csv: Path, out_json: Path) -> None:
    """A scenario's table and JSON, both whole or neither, and their dated copies."""
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.round(4).to_csv(tmp_csv, index=False)
        tmp_json.write_text(atomic.json_text(report))
    serving.archive(out_csv, out_json)
    print(table.to_string(index=False))


@contextmanager
def warmed_server(spec: dict, scenario: str, config_pbtxt: Path, sweep: list,
                  perf_data: Path, server_log: Path, work: Path,
                  instances: int | None = None) -> Iterator[tuple]:
    """The configuration's model served as the scenario measures it, every batch the sweep
    can send (or the dynamic batcher form) warmed up on every instance at once, twice, so
    that no instance compiles or captures a CUDA graph inside a measurement window. Yields
    the server, its provenance and the perf data narrowed to the served inputs."""
    perf_analyzer.check_fits(spec, sweep)  # before a server starts
    with serving.served(spec, config_pbtxt, server_log,
                        static_batching=scenario == "offline") as (server, prov):
        names = triton_config.served_inputs(config_pbtxt)
        data_json = _served_data(perf_data, names, work)
        # a batch inside the tensors (ensemble): its samples made into the request
        encode = artifacts.of(spec).request_encoder(spec, config_pbtxt) if sweep[0].shapes else None
        inputs = _warmup_inputs(perf_data if encode else data_json, spec)
        models_of = {}  # batch -> the models measured at it (the floor's: one a backend)
        for row in sweep:
            models_of.setdefault(row.batch, {})[row.model] = None
        batches = _warm_up_batches(spec, scenario, sweep)
        if prov["server"].get("kind") == "remote":  # its batches, within its max batch
            batches = _within_remote(sorted(models_of), prov["server"])
        for batch in batches:
            for model in models_of.get(batch, [sweep[-1].model]):
                warm_up(server.grpc_url, spec, [np.repeat(a, batch, axis=0) for a in inputs],
                        names, instances or spec["model"]["triton"]["instances"],
                        name=server.served_name(model), encode=encode, version=server.version)
        yield server, prov, data_json


def _within_remote(batches: list[int], server: dict) -> list[int]:
    """The batches a sweep sends, refused early where a remote model cannot take them."""
    top = server["max_batch_size"]
    over = [b for b in batches if top and b > top]
    if over:
        raise ValueError(f"remote model '{server['model']}' at {server['http_url']} takes "
                         f"batches up to {top}; the sweep sends {over}: lower the scenario's "
                         "batch sizes or serve a deployment with a larger max_batch_size")
    return batches


def _deployment(repository: Path, model: str, server: dict) -> dict:
    """The Triton model that measured a row, its max batch size and the backend that
    served it, from its config (a remote server's: as it reported it)."""
    if server.get("kind") == "remote":
        return {k: server[k] for k in ("model", "max_batch_size", "served_by")}
    config = triton_config.read(triton_repository.config_path(repository, model))
    return {"model": model, "max_batch_size": config.max_batch_size,
            "served_by": triton_config.served_by(config)}


def _batching(scenario: str, server: dict) -> str:
    """Static offline, dynamic online, on a server of ours; a remote server's as it runs."""
    if server.get("kind") == "remote":
        return f"{'dynamic' if server['dynamic_batching'] else 'static'} (the remote server's)"
    return "static" if scenario == "offline" else "dynamic"


def _warm_up_batches(spec: dict, scenario: str, sweep: list) -> list[int]:
    """The measured batch sizes; online also every power of two from the request's batch
    up to the max batch size, the batches (and padded buckets) the dynamic batcher can
    form: a bucket's first call inside a window compiles or records a graph there (on an
    H100, torch-compile's first batch of 128 took 118 s and the level never stabilised)."""
    batches = {row.batch for row in sweep}
    if scenario == "online":  # up to the max batch of the deployment online sends to
        top = deployments.for_scenario(spec, scenario, min(batches)).max_batch_size
        batches |= {b for b in (2**i for i in range(top.bit_length() + 1))
                    if min(batches) < b < top} | {top}
    return sorted(batches)


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
    an input the served config does not take: the warm-up skips it)."""
    first = json.loads(Path(data_json).read_text())["data"][0]
    return [
        np.asarray(first[t["name"]]["content"], dtype=numpy_dtype(t["dtype"]))
        .reshape([1, *first[t["name"]]["shape"]])
        if t["name"] in first else np.zeros((1, 0))
        for t in run["model"]["inputs"]
    ]
