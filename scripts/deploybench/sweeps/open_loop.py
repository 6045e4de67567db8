"""The open loop, the rate scenario (MLPerf's Server): requests arriving at set rates, Poisson
or constant, on the online deployment (dynamic batching), a level at a time (sweeps.level);
each level's tail from every request (deploybench.records.tail) and the batches Triton's dynamic
batcher formed; then the highest rate whose p99 stays within the budget, bisected between
the measured rates that bracket it.

A closed-loop sweep (online) answers "how fast with N clients"; a service owner asks "what
latency at R requests a second, and how many before the budget breaks".
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import serving
from ..measurement.progress import Progress
from ..records import tail
from ..records.tables import (
    ACHIEVED,
    EVERY,
    OFFERED,
    P99_CI,
    RATE_COLUMNS,
    SENT,
    SERVED_BY,
    SHARED_MEMORY,
    STABLE,
    THROUGHPUT,
    WITHIN,
    require_accurate,
    tail_row,
)
from ..reporting.rate import max_rate_sentence
from ..settings import deployments
from ..settings.scenarios import rate_refusal
from ..triton import perf_analyzer
from ..triton import repository as triton_repository
from ..triton.client import executions_by_batch
from ..triton.perf_command import Row
from . import level, record

FAILED = "failed"  # a level's word on why perf_analyzer gave no measurement (not a column)
# A level keeps the budget where its p99 does, the load generator sent the offered rate (a
# client that falls behind tests a lower one) and the server kept up: answered at least this
# share of the rate the requests were sent at (a backlog grows otherwise)
SUSTAINED = 0.95


def rate(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
         out_json: Path, perf_log: Path, server_log: Path, online: Path | list = ()) -> None:
    refused = rate_refusal(spec)
    if refused:
        raise ValueError(refused)
    require_accurate(accuracy)
    settings = offered(spec["model"]["rate"], online or None)
    batch, budget = settings["batch_size"], settings["p99_budget_ms"]
    model = deployments.for_scenario(spec, "online", batch).name
    config_pbtxt = triton_repository.config_path(repository, model)
    sweep = [Row(batch, 0, "none", model, rate=r, distribution=settings["distribution"])
             for r in settings["rates"]]
    work = out_csv.parent / ".rate-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        with (open(perf_log, "w") as log,
              serving.warmed_server(spec, "online", config_pbtxt, sweep, perf_data,
                                    server_log, work) as (server, prov, data_json)):
            perf_analyzer.warm_up(_windowed(spec, max(settings["rates"])), "rate", server,
                                  sweep, data_json, work, log)
            measured = _Measured(prov["server"]["served_by"], Progress(
                f"rate ({spec['key']['model']})", len(sweep) + settings["bisection_steps"]))
            for row in sweep:
                _offer(spec, server, row, data_json, work, log, prov, budget, measured)
            found = _bisect(measured.levels, lambda rate: _offer(
                spec, server, sweep[0]._replace(rate=rate), data_json, work, log, prov, budget,
                measured), settings["bisection_steps"], budget)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    levels, reports = measured.levels, measured.reports
    table = pd.DataFrame(sorted(levels, key=lambda r: r[OFFERED]), columns=RATE_COLUMNS)
    result = {
        "scenario": "rate", "settings": settings, "model": model,
        "max_rate_within_budget": found,
        "levels": sorted(reports, key=lambda r: r["offered"]),
        "provenance": prov,
    }
    record.write(table, result, out_csv, out_json)
    print(max_rate_sentence(found, budget))


@dataclass
class _Measured:
    """The levels of a rate sweep so far: the table's rows, the JSON's reports."""
    served: str  # the backend that served them
    progress: Progress
    levels: list[dict] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)


def _offer(spec: dict, server, row, data_json: Path, work: Path, log, prov: dict,
           budget: float, measured: _Measured) -> dict:
    """The level of `row`'s offered rate, kept in `measured`; its row."""
    level_row, report = _level(spec, server, row, data_json, work, log, prov, budget)
    measured.levels.append({**level_row, SERVED_BY: measured.served})
    measured.reports.append(report)
    measured.progress.done(f"{row.rate:g} requests/s: " + (
        f"p99 {level_row[EVERY['p99']]:.3g} ms, achieved {level_row[ACHIEVED]:.4g}/s"
        if EVERY["p99"] in level_row else report["error"]))
    return level_row


def offered(settings: dict, online: Path | None) -> dict:
    """The rate settings with the rates to offer: `rates` as given, or each of
    `rates_of_peak` times the online sweep's peak (its highest stable inferences/s, in
    requests/s of the rate's batch size), to three significant figures."""
    if "rates" in settings:
        return settings
    if online is None:
        raise ValueError("rate.rates_of_peak needs the configuration's online.csv")
    table = pd.read_csv(online)
    stable = table[table[STABLE].astype(str) == "True"]
    if stable.empty:
        raise ValueError(f"rate.rates_of_peak: {online} has no stable level to take the peak "
                         "from; give rate.rates instead, or re-measure online")
    peak = float(stable[THROUGHPUT].max()) / settings["batch_size"]
    rates = [float(f"{f * peak:.3g}") for f in settings["rates_of_peak"]]
    if rates != sorted(set(rates)):
        raise ValueError(f"rate.rates_of_peak {settings['rates_of_peak']} of a peak of "
                         f"{peak:.3g} requests/s give rates {rates}, not increasing")
    return {**settings, "rates": rates, "online_peak_requests_per_s": round(peak, 3)}


def _windowed(spec: dict, offered: float) -> dict:
    """The run with the rate scenario's windows for an offered rate: time windows long
    enough that the three perf_analyzer keeps hold min_requests at that rate (a quarter
    more: a Poisson count falls short of its mean by up to three standard deviations). One
    attempt: beyond saturation a backlog grows, and longer windows only deepen it."""
    settings = spec["model"]["rate"]
    window_ms = max(settings["min_window_ms"],
                    math.ceil(1.25 * settings["min_requests"] / 3 / offered * 1000))
    windowed = {**settings, "measurement_mode": "time_windows",
                "measurement_interval_ms": window_ms,
                "measurement_request_count": settings["min_requests"]}
    return {**spec, "perf": {**spec["perf"], "attempts": 1},
            "model": {**spec["model"], "rate": windowed}}


def _level(spec: dict, server, row, data_json: Path, work: Path, log, prov: dict,
           budget: float) -> tuple[dict, dict]:
    """One offered rate (sweeps.level): perf_analyzer's row, every request's percentiles,
    the batches Triton formed meanwhile, and what else loaded the host."""
    export = work / f"export_r{row.rate:g}.json"
    windowed = _windowed(spec, row.rate)
    # a run's windows, the record run's and the export's writing, with room to spare
    timeout_s = spec["model"]["rate"].get("level_timeout_s") or 120 + 3 * spec["perf"][
        "max_trials"] * windowed["model"]["rate"]["measurement_interval_ms"] / 1000
    measured = level.measure(windowed, "rate", server, prov, row, data_json, work, log,
                             export=export, timeout_s=timeout_s)
    failed, why = measured.error, None
    if failed:
        code = "?" if failed.exit_code is None else failed.exit_code
        why = ("did not finish in time" if isinstance(failed, perf_analyzer.PerfTimeout) else
               f"made perf_analyzer fail (exit code {code}: rate.json holds its error)")
    else:
        try:
            latencies, sending, seconds = tail.request_latencies(export)
        except tail.NoRequests as none:  # beyond the budget, as a backlog is
            failed, why = none, "answered no request sent in its kept windows (a backlog)"
    if failed:  # no request's latency to judge the level by
        _drain(server, row.model)
        export.unlink(missing_ok=True)
        return ({"Batch": row.batch, "Distribution": row.distribution, OFFERED: row.rate,
                 WITHIN: False, STABLE: False, SHARED_MEMORY: row.shared_memory, FAILED: why},
                {"offered": row.rate, "error": str(failed), "host_load": measured.host_load})
    export.unlink()
    tails = tail.percentiles(latencies)
    sent, achieved = arrival_rates(latencies, sending, seconds)
    level_row = {**measured.runs[0], "Distribution": row.distribution, OFFERED: row.rate,
                 SENT: sent, ACHIEVED: achieved, THROUGHPUT: achieved * row.batch,
                 **tail_row(len(latencies), seconds, tails),
                 WITHIN: keeps_budget(tails["p99"]["value"], budget, row.rate, sent, achieved,
                                      sending)}
    report = {"offered": row.rate, "requests": len(latencies), "seconds": round(seconds, 3),
              "percentiles_ms": tails, "intervals": tail.INTERVALS,
              "executions_by_batch": measured.formed,
              "host_load": measured.host_load, "telemetry": measured.telemetry}
    return level_row, report


def arrival_rates(latencies, sending_s: float, seconds: float) -> tuple[float, float]:
    """A level's requests/s sent (the intervals between its sends over their span) and
    achieved (every request answered, from the first send to the last answer), from
    tail.request_latencies."""
    return (len(latencies) - 1) / sending_s, len(latencies) / seconds


def keeps_budget(p99_ms: float, budget_ms: float, offered: float, sent: float,
                 achieved: float, sending_s: float) -> bool:
    """Whether a level keeps the budget: its p99 does, the server kept up with the requests
    sent, and they went out at the offered rate: their count within four standard deviations
    of a Poisson count's mean at that rate over their span (a client falling behind sends
    fewer, and tests a lower rate)."""
    expected = offered * sending_s
    return (p99_ms <= budget_ms and achieved >= SUSTAINED * sent
            and sent * sending_s >= expected - 4 * math.sqrt(expected) - 1)


def _why_beyond(level: dict, budget: float) -> str:
    """What kept a level out of the budget, in the words of the report's sentence."""
    if EVERY["p99"] not in level:
        return level[FAILED]
    if level[EVERY["p99"]] > budget:
        return f"exceeded it (p99 {level[EVERY['p99']]:.3g} ms)"
    if level[ACHIEVED] < SUSTAINED * level[SENT]:
        return f"built a backlog (answered {level[ACHIEVED]:.4g} of {level[SENT]:.4g}/s sent)"
    return (f"could not be offered (perf_analyzer sent {level[SENT]:.4g}/s: the load "
            "generator fell behind)")


def _drain(server, model: str, quiet_s: float = 2.0, limit_s: float = 300.0) -> None:
    """Wait until the server has run no execution of `model` for `quiet_s` (a killed
    open-loop run leaves a backlog behind), at most `limit_s`."""
    last, still_since, start = None, time.monotonic(), time.monotonic()
    while time.monotonic() - start < limit_s:
        count = sum(executions_by_batch(server, model).values())
        if count != last:
            last, still_since = count, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            return
        time.sleep(0.5)


def _bisect(levels: list[dict], measure, steps: int, budget: float) -> dict:
    """The highest rate within the budget: between the highest measured rate within it
    and the lowest beyond it above that, `steps` more levels, each halving the bracket."""
    def bracket():
        within = [r[OFFERED] for r in levels if r[WITHIN]]
        low = max(within) if within else None
        beyond = [r[OFFERED] for r in levels if not r[WITHIN] and (low is None or
                                                                    r[OFFERED] > low)]
        return low, (min(beyond) if beyond else None)

    low, high = bracket()
    for _ in range(steps):
        if low is None or high is None:
            break
        measure(round((low + high) / 2, 3))
        low, high = bracket()
    best = next((r for r in levels if r[OFFERED] == low), None)
    beyond = next((r for r in levels if r[OFFERED] == high), None)
    return {"rate": low, "bracket": [low, high],
            "beyond": _why_beyond(beyond, budget) if beyond else None,
            "p99_ms": best[EVERY["p99"]] if best else None,
            "p99_ci95_ms": [best[P99_CI[0]], best[P99_CI[1]]] if best else None,
            "throughput": best[THROUGHPUT] if best else None,
            "bracketed": low is not None and high is not None}
