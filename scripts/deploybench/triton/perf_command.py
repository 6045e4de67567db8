"""perf_analyzer's command line for one level (a Row: its flags) against a running Triton,
and its process: run in the server's environment, killed past a timeout or a memory limit."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

import psutil

from ..settings.run_facts import protocol, window
from .perf_failures import output_bytes


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


class MemoryExceeded(RuntimeError):
    """perf_analyzer grew past its memory limit and was killed; `rss`: its size then."""

    def __init__(self, rss: int):
        super().__init__(f"perf_analyzer grew to {rss / 2**30:.1f} GiB")
        self.rss = rss


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
