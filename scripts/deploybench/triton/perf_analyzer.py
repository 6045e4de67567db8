"""perf_analyzer against a running Triton: the levels of a scenario, each measured with its
retries, and the warm-up before them (the command line and its process: perf_command; what
perf_analyzer prints, read: perf_output).

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

import subprocess
from pathlib import Path

import pandas as pd
import psutil

from ..records.tables import PERF_COLUMNS, SHARED_MEMORY, STABLE, WINDOW_SPREAD
from ..settings import deployments
from ..settings.run_facts import DEFAULT_WARMUP_LEVELS, scenario_modes
from .perf_command import MemoryExceeded, Row, command, run_client
from .perf_failures import (
    PerfDeath,
    PerfError,
    PerfTimeout,
    death,
    oom_kills,
    request_bytes,
)
from .perf_output import (
    EMPTY_WINDOW,
    FOREIGN,
    UNSETTLED,
    foreign_requests,
    parse_csv,
    window_spread,
)

# A stability threshold (%) any three windows meet: the run that records an unstable level
ANY_SPREAD = 1_000_000



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
