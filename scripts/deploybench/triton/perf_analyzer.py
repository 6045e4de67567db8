"""perf_analyzer against a running Triton: its command line, its CSV, retries.

Offline (the references' static batching): concurrency 1 (offline.concurrency), one
perf_analyzer call per batch size, the model loaded without its dynamic batcher. Online:
dynamic batching, one call per concurrency level at the online batch size. Each scenario's
protocol, shared memory, window (requests or time) and warm-up are the model's, as its
reference document ran them. One call per row means a level that does not stabilise is
retried (perf.attempts), then measured once more without the stability criterion and kept,
flagged unstable with the spread of its windows (perf.on_unstable: record), or it fails the
step (fail): never a sweep silently ending with rows missing.
"""

from __future__ import annotations

import csv
import io
import math
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import psutil

from ..records.tables import (
    COMPONENT_SUM,
    COMPONENTS,
    LATENCY_COLUMNS,
    PERF_COLUMNS,
    SHARED_MEMORY,
    STABLE,
    THROUGHPUT,
    WINDOW_SPREAD,
)
from ..records.tail import KEPT_WINDOWS
from ..settings import deployments
from ..settings.run_facts import DEFAULT_WARMUP_LEVELS, protocol, scenario_modes, window
from .perf_failures import (
    PerfDeath,
    PerfError,
    PerfTimeout,
    death,
    oom_kills,
    output_bytes,
    request_bytes,
)

# perf_analyzer's CSV columns (microseconds), as the reference tables' (milliseconds).
PA_TO_TABLE = dict(zip(
    ["Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
     "Server Compute Infer", "Server Compute Output", "Client Recv", "p50 latency",
     "p90 latency", "p95 latency", "p99 latency", "Avg latency"],
    LATENCY_COLUMNS, strict=True))


REQUESTS = "requests/s"  # beside THROUGHPUT (batch x requests/s), in the scenario's JSON

# What perf_analyzer prints (-v) for each window, and when no three windows agreed
WINDOW = re.compile(r"Pass \[\d+\] throughput: ([0-9.e+]+) infer/sec\. Avg latency: (\d+) usec")
UNSETTLED = "Failed to obtain stable measurement"
# a time window that ended before any request did: too short for this level
EMPTY_WINDOW = "No valid requests recorded within time interval"
# A stability threshold (%) any three windows meet: the run that records an unstable level
ANY_SPREAD = 1_000_000
# How long perf_analyzer's query of the server's statistics at a window's edge may take on a
# busy host: requests that end meanwhile are the server's and not the client's (seen: 7 over
# the kept windows of a 1,000 requests/s level on 2 busy cores, 2026-11-28, with no other client)
STATISTICS_QUERY_S = 0.002
# Requests of the kept windows: perf_analyzer's (client) and all the server answered
SENT = re.compile(r"Client: *\n\s*Request count: (\d+)")
ANSWERED = re.compile(r"Successful request count: (\d+)")
# in the row of a run: requests the server answered in its windows that it did not send
FOREIGN = "foreign requests"



class Row(NamedTuple):
    """One measurement: a batch size at a concurrency, inputs and outputs through
    `shared_memory` (system, cuda; none: in the requests, as HTTP online sends them), sent
    to the Triton model `model` (a deployment of the run; "": the model key's). A model
    without a batch dimension (an ensemble's flattened interface) takes the batch inside
    its tensors: `shapes` ((input, dims), ...) of that one request, sent at batch 1 with
    the request in `data` (its --input-data); its inferences are the batch's samples.
    `rate`: open loop (the rate scenario), requests/s arriving as `distribution` says,
    instead of `concurrency` requests in flight."""

    batch: int
    concurrency: int
    shared_memory: str
    model: str = ""
    shapes: tuple = ()
    data: str = ""
    rate: float = 0.0
    distribution: str = ""


def command(run: dict, scenario: str, server, row: Row, data_json: Path, csv_path: Path,
            attempt: int = 1, scale: int = 1, stability: float | None = None,
            export: Path | None = None) -> list[str]:
    """The perf_analyzer command line. A retry doubles the window (its request count, or
    its interval in time windows), as perf_analyzer advises when it cannot stabilise;
    `scale` multiplies it (the warm-up's longer window); `stability` replaces
    perf.stability_percentage. Verbose (-v): each window's figures, for their spread.
    `export`: every request's timestamps (and data) written there (deploybench.records.tail)."""
    batch, concurrency = row.batch, row.concurrency
    model, perf = run["model"], run["perf"]
    mode, interval_ms, request_count = window(run, scenario)
    longer = scale * 2 ** (attempt - 1)
    if mode == "time_windows":
        interval_ms *= longer
    else:
        request_count *= longer
    via = protocol(run, scenario)
    cmd = [
        str(server.install.perf_analyzer),
        "-m", server.served_name(row.model or run["key"]["model"]),
        *(["-x", server.version] if server.version else []),
        "-b", "1" if row.shapes else str(batch),
        *(f"--shape={name}:{','.join(map(str, dims))}" for name, dims in row.shapes),
        # open loop: requests sent on schedule, never waiting for an answer (a backlog
        # shows in the latency, as a service sees it)
        *(["--request-rate-range", f"{row.rate:g}:{row.rate:g}",
            "--request-distribution", row.distribution, "--async"] if row.rate
          else ["--concurrency-range", f"{concurrency}:{concurrency}"]),
        "--input-data", row.data or str(data_json), "--measurement-mode", mode,
        *(["--measurement-request-count", str(request_count)]
          if mode == "count_windows" else []),
        "-p", str(interval_ms),
        "-s", str(stability or perf["stability_percentage"]), "-r", str(perf["max_trials"]),
        "-f", str(csv_path), "--verbose-csv", "-v",
        "-i", via, "-u", server.grpc_url if via == "grpc" else server.http_url,
    ]
    if export:
        cmd += ["--profile-export-file", str(export)]
    if row.shared_memory != "none":
        cmd += ["--shared-memory", row.shared_memory,
                "--output-shared-memory-size", str(output_bytes(model["outputs"], batch))]
    return cmd


# perf_analyzer's profile export (every request's tail) holds every response's outputs
# in memory until it ends: FastPitch's 330 KB mels at 350 inf/s on an H100 grew it past the
# host's 128 GiB in minutes (2026-11-27, the OOM killer ended it). A run with the export is
# watched, and past the smaller of these the level is measured again without it.
EXPORT_MEMORY_CAP = 4 * 2**30
EXPORT_MEMORY_SHARE = 1 / 8  # of the memory available when the run starts
# Where the export only adds the tail (online; the rate scenario cannot do without it):
# writing and reading it costs time past the level's windows, FastPitch's 2.3 GB turning a
# 30-s level into 211 s (2026-11-27), so a smaller cap ends such a level within seconds
TAIL_EXPORT_CAP = 2**30
EXPORT_DROPPED = "tail not taken"  # a measured row's key: why, where the export was dropped


class MemoryExceeded(RuntimeError):
    """perf_analyzer grew past its memory limit and was killed; `rss`: its size then."""

    def __init__(self, rss: int):
        super().__init__(f"perf_analyzer grew to {rss / 2**30:.1f} GiB")
        self.rss = rss


def export_limit(scenario: str) -> int:
    """The memory a perf_analyzer run of `scenario` with the profile export may grow to, in
    bytes."""
    cap = EXPORT_MEMORY_CAP if scenario == "rate" else TAIL_EXPORT_CAP
    return int(min(cap, psutil.virtual_memory().available * EXPORT_MEMORY_SHARE))


def export_dropped(run: dict, row: Row, rss: int) -> str:
    """Why a level's every-request tail was not taken."""
    size = request_bytes(run["model"], row)
    each = f", {size:,} bytes of inputs and outputs each" if size else ""
    return (f"perf_analyzer's profile export, which holds every request{each}, grew past "
            f"{rss / 2**30:.1f} GiB: the level was measured without it, and so were those "
            "after it")


def _watch_memory(proc: subprocess.Popen, limit: int, over: list) -> None:
    """Kill `proc` once its resident memory passes `limit` (recorded in `over`)."""
    while proc.poll() is None:
        try:
            rss = psutil.Process(proc.pid).memory_info().rss
        except psutil.Error:
            return
        if rss > limit:
            over.append(rss)
            proc.kill()
            return
        time.sleep(0.25)


def run_client(server, cmd: list[str], timeout_s: float | None = None,
               memory_limit: int | None = None) -> subprocess.CompletedProcess:
    """perf_analyzer against `server`, in its environment (its shared-memory names), with
    the descriptors it hands on (the device lock), in a session of its own that the
    server's watchdog ends if this step is killed (deploybench.triton.watchdog).
    TimeoutExpired after `timeout_s`, perf_analyzer killed, with what it printed;
    MemoryExceeded once it grows past `memory_limit` bytes."""
    watchdog = getattr(server, "watchdog", None)
    over: list[int] = []
    with subprocess.Popen(cmd, env=server.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, pass_fds=server.keep_fds,
                          start_new_session=True) as proc:
        if watchdog:
            watchdog.add(proc.pid)
        if memory_limit:
            threading.Thread(target=_watch_memory, args=(proc, memory_limit, over),
                             daemon=True).start()
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(cmd, timeout_s, out, err) from None
        except BaseException:  # Ctrl-C, a job's SIGTERM: perf_analyzer ends with the step
            proc.kill()
            raise
        finally:
            if watchdog:
                watchdog.discard(proc.pid)
    if over:
        raise MemoryExceeded(over[0])
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def parse_csv(text: str, row: Row) -> dict:
    """One perf_analyzer CSV (one concurrency level) -> one row in the reference tables'
    units."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise PerfError(f"expected one measurement row from perf_analyzer, got {len(rows)}")
    measured = rows[0]
    # perf_analyzer counts -b inferences a request: 1 where the batch is in the tensors
    per_second = float(measured["Inferences/Second"])
    # the rate scenario's CSV has the offered rate where the others have the concurrency
    table = {"Batch": row.batch, "Concurrency": int(measured.get("Concurrency", 0)),
             THROUGHPUT: per_second * row.batch if row.shapes else per_second,
             REQUESTS: per_second if row.shapes else per_second / row.batch}
    table |= {ms: float(measured[us]) / 1000.0 for us, ms in PA_TO_TABLE.items()}
    return table | {SHARED_MEMORY: row.shared_memory,
                    COMPONENT_SUM: sum(table[c] for c in COMPONENTS)}


def foreign_requests(stdout: str, row: Row, measured: dict) -> int | None:
    """The requests the server answered in the windows perf_analyzer kept beyond those it
    sent there (another client's: the server's statistics count everyone's), less what
    the windows' edges account for: at both edges of each kept window, the requests in
    flight and those ending while perf_analyzer queries the statistics, which one side
    counts and the other not; None where perf_analyzer printed no counts."""
    sent, answered = SENT.search(stdout), ANSWERED.search(stdout)
    if not sent or not answered:
        return None
    in_flight = (math.ceil(row.rate * measured["p99 latency (ms)"] / 1000) + 1 if row.rate
                 else row.concurrency)
    edge = in_flight + math.ceil(measured.get(REQUESTS, 0) * STATISTICS_QUERY_S)
    return max(0, int(answered.group(1)) - int(sent.group(1)) - 2 * KEPT_WINDOWS * edge)


def window_spread(stdout: str) -> float:
    """The spread of the last three windows perf_analyzer printed (those its stability
    criterion compares): the larger of throughput's and average latency's (max - min) /
    mean, in %; NaN where it printed fewer."""
    windows = np.array(WINDOW.findall(stdout), dtype=float)[-3:]
    if len(windows) < 3:
        return float("nan")
    spreads = (windows.max(axis=0) - windows.min(axis=0)) / windows.mean(axis=0) * 100
    return round(float(spreads.max()), 2)


def measure(run: dict, scenario: str, server, row: Row, data_json: Path, work: Path,
            log, export: Path | None = None, timeout_s: float | None = None,
            scale: int = 1) -> dict:
    """One row, retried up to perf.attempts times (with longer windows) when perf_analyzer
    cannot stabilise; then, with perf.on_unstable: record, measured once more over three
    windows of the last attempt's length (twice that where a window ended before any
    request did) and kept, flagged unstable. `scale`: windows that many times as long."""
    batch, concurrency = row.batch, row.concurrency
    csv_path = work / f"pa_{scenario}_b{batch}_c{concurrency}_r{row.rate:g}_{row.shared_memory}.csv"
    perf = run["perf"]
    attempts = perf["attempts"]

    dropped: list[str] = []  # why the profile export was dropped, where it was

    def attempt(number: int, stability: float | None = None):
        nonlocal export
        server.ensure_alive()  # a dead server is reported as such, never retried
        cmd = command(run, scenario, server, row, data_json, csv_path, number, scale,
                      stability=stability, export=export)
        csv_path.unlink(missing_ok=True)
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        # the server's environment: its shared-memory names (deploybench.triton.server)
        try:
            result = run_client(server, cmd, timeout_s, export and export_limit(scenario))
        except subprocess.TimeoutExpired as late:  # killed: an open-loop backlog may never drain
            log.write(f"{late.stdout or ''}[no result within {timeout_s:g} s: killed]\n")
            raise PerfTimeout(f"perf_analyzer did not finish the {scenario} level at batch "
                            f"{batch}, rate {row.rate:g}/s within {timeout_s:g} s") from None
        except MemoryExceeded as over:  # the level again, without every request's tail
            export, why = None, export_dropped(run, row, over.rss)
            dropped.append(why)
            log.write(f"[killed: {why}]\n")
            return attempt(number, stability)
        log.write(result.stdout + result.stderr)
        log.flush()
        if result.returncode == 0 and csv_path.is_file():
            measured = parse_csv(csv_path.read_text(), row)
            return result, measured | {WINDOW_SPREAD: window_spread(result.stdout),
                                       FOREIGN: foreign_requests(result.stdout, row, measured),
                                       **({EXPORT_DROPPED: dropped[0]} if dropped else {})}
        server.ensure_alive()
        return result, None

    ooms = oom_kills()
    for number in range(1, attempts + 1):
        result, measured = attempt(number)
        if measured:
            return measured | {STABLE: True}
        why = death(result, row, run, ooms)
        if why:
            raise PerfDeath(f"{why}, on the {scenario} measurement at batch {batch}, "
                            f"concurrency {concurrency}, {row.shared_memory} shared memory",
                            exit_code=result.returncode)
        log.write(f"[attempt {number}/{attempts} failed, exit code {result.returncode}]\n")
    output = result.stdout + result.stderr
    unsettled, empty = UNSETTLED in output, EMPTY_WINDOW in output
    if (unsettled or empty) and perf["on_unstable"] == "record":
        # an empty window was too short: the windows of the run kept are twice as long
        log.write(f"[unstable after {attempts} attempts: measured once more over three "
                  f"windows{', twice as long' if empty else ''}, recorded as unstable "
                  f"(perf.on_unstable: record)]\n")
        result, measured = attempt(attempts + 1 if empty else attempts, stability=ANY_SPREAD)
        if measured:
            print(f"{scenario}: batch {batch}, concurrency {concurrency}, "
                  f"{row.shared_memory} shared memory did not stabilise within "
                  f"{perf['stability_percentage']} % in {attempts} attempts: recorded as "
                  f"unstable (window spread {measured[WINDOW_SPREAD]} %)")
            return measured | {STABLE: False}
    raise _failure(scenario, row, perf, result, unsettled, empty)


def _failure(scenario: str, row: Row, perf: dict, result, unsettled: bool,
             empty: bool) -> PerfError:
    """The error of a level that found no measurement in perf.attempts attempts."""
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
    exit_code = None
    if unsettled:
        why = f"found no stable {scenario} measurement"
    elif empty:
        why = f"had a window without a finished request on the {scenario} measurement"
    else:
        exit_code = result.returncode
        why = f"failed (exit code {exit_code}) on the {scenario} measurement"
    return PerfError(
        f"perf_analyzer {why} at batch {row.batch}, concurrency {row.concurrency}, "
        f"{row.shared_memory} shared memory in {perf['attempts']} attempts (stability_percentage="
        f"{perf['stability_percentage']}, max_trials={perf['max_trials']}, on_unstable="
        f"{perf['on_unstable']}):\n{tail}", exit_code=exit_code
    )


def warm_up(run: dict, scenario: str, server, sweep: list[Row], data_json: Path, work: Path,
            log) -> list[dict]:
    """The reference runners' warm-up: before the sweep, perf_analyzer at each of
    `warmup_levels` with a window `warmup_windows` times as long, in each shared-memory
    mode, run_facts.WARM_UP_WINDOWS windows whatever their spread, its numbers discarded. A
    dead server fails, as does a perf_analyzer killed by a signal (PerfDeath: the levels
    would be measured unwarmed); the runs that failed otherwise are returned (batch,
    concurrency, shared memory, exit code, its last line), which the scenario records and
    prints."""
    scale = run["model"][scenario].get("warmup_windows", 0)
    failed = []
    for row in warmup_rows(run, scenario, sweep) if scale else []:
        cmd = command(run, scenario, server, row, data_json, work / "warm-up.csv", scale=scale,
                      stability=ANY_SPREAD)
        log.write(f"[warm-up, discarded] $ {' '.join(cmd)}\n")
        log.flush()
        ooms = oom_kills()
        result = run_client(server, cmd)
        log.write(result.stdout + result.stderr + f"[warm-up exit code {result.returncode}]\n")
        log.flush()
        server.ensure_alive()
        where = (f"batch {row.batch}, concurrency {row.concurrency}, {row.shared_memory} "
                 "shared memory")
        why = death(result, row, run, ooms)
        if why:
            raise PerfDeath(f"{why}, on the {scenario} warm-up at {where}: the levels after it "
                            "would be measured unwarmed", exit_code=result.returncode)
        if result.returncode:
            last = (result.stdout + result.stderr).strip().splitlines()[-1:] or [""]
            failed.append({"batch": row.batch, "concurrency": row.concurrency,
                           SHARED_MEMORY: row.shared_memory, "exit_code": result.returncode,
                           "last_line": last[0]})
            print(f"{scenario}: the warm-up at {where} failed (exit code {result.returncode}: "
                  f"{last[0]}); the levels after it may be measured unwarmed (recorded as "
                  "warmup_failed)", flush=True)
    return failed


def warmup_rows(run: dict, scenario: str, sweep: list[Row]) -> list[Row]:
    """The warm-up's levels of a scenario (`warmup_levels`, each [batch, concurrency]), in
    each shared-memory mode of its sweep, each sent to the deployment that serves its batch."""
    levels = run["model"][scenario].get("warmup_levels") or DEFAULT_WARMUP_LEVELS
    rows = []
    for mode in dict.fromkeys(row.shared_memory for row in sweep):
        mine = [row for row in sweep if row.shared_memory == mode]
        top = max(mine, key=lambda r: r.batch)
        tops = (top.batch, max(r.concurrency for r in mine))
        for level in levels:
            batch, concurrency = (value if isinstance(value, int) else
                                  max(1, most // (2 if value == "max/2" else 1))
                                  for value, most in zip(level, tops))
            model = next((r.model for r in mine if r.batch == batch), top.model)
            rows.append(top._replace(batch=batch, concurrency=concurrency, model=model))
    return rows


def sweep(run: dict, scenario: str) -> list[Row]:
    """The rows of a scenario, in the order of the reference tables (offline: each batch
    size in every shared-memory mode, one after the other), each sent to the deployment
    that measures it (deploybench.settings.deployments)."""
    settings = run["model"][scenario]
    if scenario == "offline":
        # a remote server shares no memory with this host: everything in the requests
        modes = (["none"] if run["server"]["kind"] == "remote"
                 else scenario_modes(settings, scenario))
        return [Row(b, settings.get("concurrency", 1), mode,
                    deployments.for_scenario(run, scenario, b).name)
                for mode in modes for b in settings["batch_sizes"]]
    batch = settings["batch_size"]
    model = deployments.for_scenario(run, scenario, batch).name
    return [Row(batch, c, mode, model) for c in settings["concurrency"]
            for mode in scenario_modes(settings, scenario)]


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=PERF_COLUMNS)
