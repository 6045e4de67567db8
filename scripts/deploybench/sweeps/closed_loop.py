"""The closed loop: offline and online performance of a deployment, measured by perf_analyzer
on Triton, a level at a time (sweeps.level), for the offline, online and floor steps
(deploybench.steps.performance) and each configuration search point
(deploybench.steps.search), on a server serving.warmed_server started and warmed up; each
scenario's table and JSON written by sweeps.record.

Offline (the references' static batching): concurrency 1 (offline.concurrency), one
perf_analyzer call per batch size, the model loaded without its dynamic batcher. Online:
dynamic batching, one call per concurrency level at the online batch size. Protocol, shared
memory, windows and warm-up as the model's reference document ran them
(deploybench.triton.perf_analyzer).
"""

from __future__ import annotations

import math
import shutil
import time
from functools import partial
from pathlib import Path

import pandas as pd

from .. import artifacts, serving
from ..backends import export_precision
from ..measurement import telemetry
from ..measurement.progress import Progress
from ..measurement.repeats import median_run, spread
from ..records import tail
from ..records.tables import (
    SERVED_BY,
    SHARED_MEMORY,
    TAIL_COLUMNS,
    THROUGHPUT,
    require_accurate,
    tail_row,
)
from ..settings.run_facts import WARM_UP_WINDOWS, online_refusal, protocol, window
from ..triton import config as triton_config
from ..triton import cpp_backend, install, perf_analyzer, perf_output
from ..triton import repository as triton_repository
from ..triton.client import send_all
from . import level, record


def offline(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
            out_json: Path, perf_log: Path, server_log: Path,
            data_dir: Path | None = None) -> None:
    """`data_dir`: the dataset an ensemble's requests and cache warm-up are drawn from
    (none for a single model)."""
    require_accurate(accuracy)
    _measure(spec, "offline", repository, perf_analyzer.sweep(spec, "offline"), perf_data,
             out_csv, out_json, perf_log, server_log, requests=True, data_dir=data_dir)


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
    tail_rows, untaken = [], []  # a level's tail or None; the levels without one, and why
    with (open(perf_log, "w") as log,
          serving.warmed_server(spec, scenario, config_pbtxt, sweep, perf_data, server_log,
                                work) as (server, prov, data_json)):
        if sweep[0].shapes:  # an ensemble: its cache warmed as the reference's was
            extra |= _cache_warmup(spec, server, config_pbtxt, data_dir, sweep[0].model)
        unwarmed = perf_analyzer.warm_up(spec, scenario, server, sweep, data_json, work, log)
        if unwarmed:  # the levels after a failed warm-up run: flagged in the JSON
            extra["warmup_failed"] = unwarmed
        levels = Progress(f"{out_csv.stem} ({spec['key']['model']})", len(sweep))
        repeats = spec["perf"].get("repeats", 1)
        for row in sweep:
            key = {"Batch": row.batch, "Concurrency": row.concurrency,
                   SHARED_MEMORY: row.shared_memory}
            served.append({**key, **_deployment(repository, row.model, prov["server"])})
            # online: every request's tail (one run a level: the export is that run's)
            export = (work / "export.json" if scenario == "online" and repeats == 1
                      and not untaken else None)
            measured = level.measure(
                spec, scenario, server, prov, row, data_json, work, log, repeats=repeats,
                export=export, inside=partial(_tail_inside, spec, server, row, data_json, work,
                                              log, export, untaken[0]["why"] if untaken else None))
            found, why = measured.inside
            tails += [{**key, **found}] if found is not None else []
            untaken += [{**key, "why": why}] if why else []
            tail_rows.append(tails[-1] if found is not None else None)
            if measured.formed is not None:  # what the dynamic batcher made of the requests
                formed.append({**key, "executions_by_batch": measured.formed})
            runs = measured.runs
            rows.append({**median_run(runs), SERVED_BY: served[-1]["served_by"]})
            requests.append({**key, perf_output.REQUESTS: rows[-1][perf_output.REQUESTS],
                             "samples_per_request": row.batch,
                             "request_shapes": dict(row.shapes) or None})
            loads.append({**key, **measured.host_load})
            usage.append({**key, **measured.telemetry})
            if repeats > 1:
                noise.append({**key, **spread([r[THROUGHPUT] for r in runs],
                                               spec["perf"]["stability_percentage"])})
            # the deployment where a configuration has several (deploybench.settings.deployments)
            deployment = f", model {row.model}" if row.model != spec["key"]["model"] else ""
            levels.done(f"batch {row.batch}, concurrency {row.concurrency}, "
                        f"{row.shared_memory} shared memory{deployment}")
        cache = artifacts.cache_report(server.metrics())
    table = telemetry.with_columns(perf_analyzer.table(rows), usage)
    if tails:
        table = pd.concat([table, tail_columns(tail_rows, table.index)], axis=1)
    report = {
        "scenario": scenario,
        "perf_analyzer_settings": _settings_ran(spec, scenario, sweep, prov),
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
        **({"tail_not_taken": untaken} if untaken else {}),
        **({"batches_formed": formed} if formed else {}),
        "provenance": prov,
    }
    record.write(table, report, out_csv, out_json)


def _settings_ran(spec: dict, scenario: str, sweep: list, prov: dict) -> dict:
    """How perf_analyzer measured a scenario, as its JSON records it."""
    return {**spec["perf"], **spec["model"][scenario],
            **dict(zip(("measurement_mode", "measurement_interval_ms",
                        "measurement_request_count"), window(spec, scenario))),
            "protocol": protocol(spec, scenario),
            "warmup_trials": WARM_UP_WINDOWS,
            "shared_memory": sorted({row.shared_memory for row in sweep}),
            "batching": _batching(scenario, prov["server"])}


def _tail_inside(spec: dict, server, row, data_json: Path, work: Path, log, export: Path | None,
                 earlier: str | None, runs: list[dict]) -> tuple[dict | None, str | None]:
    """A level's tail (None: not taken) and why not (its export dropped, or an earlier
    level's was), within the level's sampling (sweeps.level)."""
    why = runs[-1].pop(perf_analyzer.EXPORT_DROPPED, None) or earlier
    found = (_tail(spec, server, row, data_json, work, log, export, runs)
             if export and not why else None)
    return found, why


LENGTHENINGS = 3  # runs of a level with longer windows, at most, for perf.min_* settings


def _tail(spec: dict, server, row, data_json: Path, work: Path, log, export: Path,
          runs: list) -> dict:
    """An online level's every-request tail (deploybench.records.tail). Where its kept windows held
    fewer than perf.min_requests requests or spanned less than perf.min_duration_s, the
    level is measured again with longer windows (up to LENGTHENINGS times), and that run
    replaces it in `runs`: the row and its tail are one run's."""
    found, scale = tail.summary(export), 1
    for _ in range(LENGTHENINGS):
        longer = _lengthened(spec, found, scale)
        if not longer:
            break
        again = perf_analyzer.measure(spec, "online", server, row, data_json, work, log,
                                      export=export, scale=longer)
        if perf_analyzer.EXPORT_DROPPED in again:  # too big to keep: the shorter run stays
            break
        scale, runs[:] = longer, [again]
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
    mode, _, count = window(spec, "online")
    if mode == "time_windows":
        return max(scale + 1, math.ceil(scale * wanted / found["requests"]))
    return max(scale + 1, math.ceil(wanted / tail.KEPT_WINDOWS / count))


def tail_columns(tails: list[dict], index) -> pd.DataFrame:
    """The levels' tails (tail.summary, in the table's row order; None: not taken) as
    online.csv's columns beside perf_analyzer's: requests, seconds, every percentile and
    p99's interval."""
    rows = [tail_row(t["requests"], t["seconds"], t["percentiles_ms"]) if t else {}
            for t in tails]
    return pd.DataFrame(rows, columns=TAIL_COLUMNS, index=index)


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


