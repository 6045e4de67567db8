"""perf_analyzer against a running Triton: its command line, its CSV, retries.

Offline (the references' static batching): concurrency 1, one perf_analyzer call per batch
size, the model loaded without its dynamic batcher. Online: dynamic batching, one call per
concurrency level at the online batch size. Each scenario's protocol, shared memory,
window (requests or time) and warm-up are the model's, as its reference document ran them.
One call per row means a level that does not stabilise is retried (perf.attempts), then
measured once more without the stability criterion and kept, flagged unstable with the
spread of its windows (perf.on_unstable: record), or it fails the step (fail): never a
sweep silently ending with rows missing.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import psutil

from .. import deployments
from ..measurement.isolation import SHM
from ..run_facts import DEFAULT_WARMUP_LEVELS, shared_memory_modes
from ..tables import (
    COMPONENT_SUM,
    COMPONENTS,
    LATENCY_COLUMNS,
    PERF_COLUMNS,
    SHARED_MEMORY,
    STABLE,
    THROUGHPUT,
    WINDOW_SPREAD,
)
from ..tail import KEPT_WINDOWS
from ..tensors import numpy_dtype

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
# Requests of the kept windows: perf_analyzer's (client) and all the server answered
SENT = re.compile(r"Client: *\n\s*Request count: (\d+)")
ANSWERED = re.compile(r"Successful request count: (\d+)")
# in the row of a run: requests the server answered in its windows that it did not send
FOREIGN = "foreign requests"


class PerfError(RuntimeError):
    """perf_analyzer failed or did not reach a stable measurement; `exit_code`: its own,
    where it failed rather than did not settle."""

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code


class PerfDeath(PerfError):
    """A run that ended for a reason no retry mends: perf_analyzer killed by a signal, the
    python backend's stub dead, /dev/shm full."""


# What perf_analyzer prints when a python-backend model's stub process has died
STUB_DEAD = re.compile(r"Stub process '([^']+)' is not healthy")


def shm_space() -> tuple[int, int] | None:
    """/dev/shm's free and total bytes (None where the host has none)."""
    try:
        st = os.statvfs(SHM)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def oom_kills() -> int | None:
    """The processes the kernel's OOM killer has ended since boot (/proc/vmstat), or None."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def death(result: subprocess.CompletedProcess, row: Row, run: dict,
          ooms_before: int | None = None) -> str | None:
    """What ended a failed run, where a retry cannot help; None where it may.
    `ooms_before`: oom_kills() when the run started (an OOM kill since is named)."""
    why = None
    if result.returncode < 0:
        name = signal.Signals(-result.returncode).name
        why = f"perf_analyzer was killed by {name}"
        space = shm_space()
        if name == "SIGBUS" and row.shared_memory == "system" and space:  # a page it lacked
            why += (f": a system shared-memory region it wrote had no memory behind it, "
                    f"/dev/shm has {space[0]} bytes free of {space[1]} (full, or a region "
                    "truncated under it)")
    stub = STUB_DEAD.search(result.stdout + result.stderr)
    if stub and not why:
        why = (f"the python backend's stub process of '{stub.group(1)}' died (killed: see "
               "the server log)")
    ooms = oom_kills()
    if why and ooms_before is not None and ooms is not None and ooms > ooms_before:
        size = request_bytes(run["model"], row)
        why += (f"; the kernel's OOM killer ended {ooms - ooms_before} process(es) meanwhile: "
                "out of memory" + (f" (a request's inputs and outputs: {size:,} bytes)"
                                   if size else ""))
    return why


# Copies of a request's inputs and outputs a measurement holds at once, at the least:
# perf_analyzer's data, its shared-memory regions or request, the server's buffers
IO_COPIES = 3


def request_bytes(model: dict, row: Row) -> int | None:
    """A request's inputs and outputs at the row's batch, in bytes; None where a tensor's
    size is not known before it is sent (a variable dimension, strings, an ensemble's
    request)."""
    tensors = [*model["inputs"], *model["outputs"]]
    if row.shapes or any(d < 0 for t in tensors for d in t["dims"]) or any(
            t["dtype"] == "BYTES" for t in tensors):
        return None
    return output_bytes(tensors, row.batch)


def check_fits(run: dict, rows: list[Row]) -> None:
    """Refuse, before a server starts, a level whose requests cannot fit this host: their
    inputs and outputs alone, IO_COPIES times over (the model's own memory comes on top),
    past the memory available, or its system shared-memory regions past /dev/shm's free
    space. Such a batch used to end, after retries, as a stub the OOM killer ended,
    reported as no stable measurement."""
    available = psutil.virtual_memory().available
    space = shm_space()
    for row in rows:
        size = request_bytes(run["model"], row)
        if size is None:
            continue
        where = f"batch {row.batch} ({row.shared_memory} shared memory)"
        if size * IO_COPIES > available:
            raise ValueError(
                f"{where}: a request's inputs and outputs take {size:,} bytes, {IO_COPIES} "
                f"copies of them {size * IO_COPIES / 2**30:.1f} GiB, more than the "
                f"{available / 2**30:.1f} GiB of memory available here; lower the batch "
                "sizes (offline.batch_sizes, online.batch_size) or measure on a larger host")
        if row.shared_memory == "system" and space and size > space[0]:
            raise ValueError(
                f"{where}: its shared-memory regions take {size:,} bytes, more than the "
                f"{space[0]:,} bytes free in /dev/shm; lower the batch "
                "sizes, free /dev/shm, or measure without shared memory")


class PerfTimeout(PerfError):
    """perf_analyzer did not finish within its time limit (and was killed)."""


def output_bytes(outputs: list[dict], batch: int) -> int:
    per_sample = sum(
        int(np.prod(t["dims"])) * np.dtype(numpy_dtype(t["dtype"])).itemsize for t in outputs
    )
    return per_sample * batch


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


def window(run: dict, scenario: str) -> tuple[str, int, int]:
    """The scenario's measurement mode, interval (ms) and request count: the model's
    scenario settings over the run's perf settings. Online, whose every request's tail is
    read, counts at least perf.min_requests over the three windows perf_analyzer keeps."""
    settings, perf = run["model"][scenario], run["perf"]
    count = settings["measurement_request_count"]
    if scenario == "online":
        count = max(count, math.ceil(perf.get("min_requests", 0) / KEPT_WINDOWS))
    return (settings.get("measurement_mode", perf["measurement_mode"]),
            settings.get("measurement_interval_ms", perf["measurement_interval_ms"]), count)


def protocol(run: dict, scenario: str) -> str:
    """gRPC offline and HTTP online unless the model's scenario says otherwise."""
    return run["model"][scenario].get("protocol", "grpc" if scenario == "offline" else "http")


def command(run: dict, scenario: str, server, row: Row, data_json: Path, csv_path: Path,
            attempt: int = 1, scale: int = 1, stability: float | None = None,
            export: Path | None = None) -> list[str]:
    """The perf_analyzer command line. A retry doubles the window (its request count, or
    its interval in time windows), as perf_analyzer advises when it cannot stabilise;
    `scale` multiplies it (the warm-up's longer window); `stability` replaces
    perf.stability_percentage. Verbose (-v): each window's figures, for their spread.
    `export`: every request's timestamps (and data) written there (deploybench.tail)."""
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


def run_client(server, cmd: list[str], timeout_s: float | None = None
               ) -> subprocess.CompletedProcess:
    """perf_analyzer against `server`, in its environment (its shared-memory names), with
    the descriptors it hands on (the device lock), in a session of its own that the
    server's watchdog ends if this step is killed (deploybench.triton.watchdog).
    TimeoutExpired after `timeout_s`, perf_analyzer killed, with what it printed."""
    watchdog = getattr(server, "watchdog", None)
    with subprocess.Popen(cmd, env=server.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, pass_fds=server.keep_fds,
                          start_new_session=True) as proc:
        if watchdog:
            watchdog.add(proc.pid)
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
    the windows' edges account for (the requests in flight at each edge, which one side
    counts and the other not); None where perf_analyzer printed no counts."""
    sent, answered = SENT.search(stdout), ANSWERED.search(stdout)
    if not sent or not answered:
        return None
    in_flight = (math.ceil(row.rate * measured["p99 latency (ms)"] / 1000) + 1 if row.rate
                 else row.concurrency)
    return max(0, int(answered.group(1)) - int(sent.group(1)) - 2 * in_flight)


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

    def attempt(number: int, stability: float | None = None):
        server.ensure_alive()  # a dead server is reported as such, never retried
        cmd = command(run, scenario, server, row, data_json, csv_path, number, scale,
                      stability=stability, export=export)
        csv_path.unlink(missing_ok=True)
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        # the server's environment: its shared-memory names (deploybench.triton.server)
        try:
            result = run_client(server, cmd, timeout_s)
        except subprocess.TimeoutExpired as late:  # killed: an open-loop backlog may never drain
            log.write(f"{late.stdout or ''}[no result within {timeout_s:g} s: killed]\n")
            raise PerfTimeout(f"perf_analyzer did not finish the {scenario} level at batch "
                            f"{batch}, rate {row.rate:g}/s within {timeout_s:g} s") from None
        log.write(result.stdout + result.stderr)
        log.flush()
        if result.returncode == 0 and csv_path.is_file():
            measured = parse_csv(csv_path.read_text(), row)
            return result, measured | {WINDOW_SPREAD: window_spread(result.stdout),
                                       FOREIGN: foreign_requests(result.stdout, row, measured)}
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
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
    exit_code = None
    if unsettled:
        why = f"found no stable {scenario} measurement"
    elif empty:
        why = f"had a window without a finished request on the {scenario} measurement"
    else:
        exit_code = result.returncode
        why = f"failed (exit code {exit_code}) on the {scenario} measurement"
    raise PerfError(
        f"perf_analyzer {why} at batch {batch}, concurrency {concurrency}, "
        f"{row.shared_memory} shared memory in {attempts} attempts (stability_percentage="
        f"{perf['stability_percentage']}, max_trials={perf['max_trials']}, on_unstable="
        f"{perf['on_unstable']}):\n{tail}", exit_code=exit_code
    )


def warm_up(run: dict, scenario: str, server, sweep: list[Row], data_json: Path, work: Path,
            log) -> None:
    """The reference runners' warm-up: before the sweep, perf_analyzer at each of
    `warmup_levels` with a window `warmup_windows` times as long, in each shared-memory
    mode, its numbers discarded (it need not stabilise; a dead server still fails)."""
    scale = run["model"][scenario].get("warmup_windows", 0)
    if not scale:
        return
    for row in warmup_rows(run, scenario, sweep):
        cmd = command(run, scenario, server, row, data_json, work / "warm-up.csv", scale=scale)
        log.write(f"[warm-up, discarded] $ {' '.join(cmd)}\n")
        log.flush()
        result = run_client(server, cmd)
        log.write(result.stdout + result.stderr + f"[warm-up exit code {result.returncode}]\n")
        log.flush()
        server.ensure_alive()


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
    that measures it (deploybench.deployments)."""
    settings = run["model"][scenario]
    if scenario == "offline":
        # a remote server shares no memory with this host: everything in the requests
        modes = (["none"] if run["server"]["kind"] == "remote"
                 else shared_memory_modes(settings))
        return [Row(b, 1, mode, deployments.for_scenario(run, scenario, b).name)
                for mode in modes for b in settings["batch_sizes"]]
    batch = settings["batch_size"]
    model = deployments.for_scenario(run, scenario, batch).name
    return [Row(batch, c, "none", model) for c in settings["concurrency"]]


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=PERF_COLUMNS)
