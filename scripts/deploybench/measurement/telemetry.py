"""What the device and the serving processes did while a row was measured, sampled by a
background thread: `with Telemetry(device, server_pids=[pid]) as t: ...`, then `t.result`.

Always: CPU (% of one core, so up to 100 x cpus) and resident memory of the process tree
that serves (the server and its python-backend stubs; the step itself for a native run).
On a GPU (`device.measured_device`), through NVML: utilisation, memory used, power, SM
clock, clock event ("throttle") reasons and the energy the GPU's counter saw. A reading
NVML cannot give is recorded as "unavailable: <reason>"; it never fails the measurement.

The thread wakes every 100 ms and reads a handful of NVML values; the process tree's
CPU times every 0.5 s (a 100 ms window would be a few clock ticks) and its members every
5 s (the server's stubs outlive a level): cheap beside a server and perf_analyzer.
"""

from __future__ import annotations

import math
import os
import threading
import time

import pandas as pd
import psutil

from ..tables import (
    CPU_MAX,
    CPU_MEAN,
    ENERGY_PER_INFERENCE,
    GPU_MEMORY_MAX,
    GPU_TELEMETRY,
    GPU_UTIL_MAX,
    GPU_UTIL_MEAN,
    INFERENCES_PER_WATT,
    POWER_MEAN,
    PROCESS_TELEMETRY,
    RSS_MAX,
    RSS_MEAN,
    SM_CLOCK_MEAN,
    THROTTLE_REASONS,
    THROUGHPUT,
)
from . import nvml

INTERVAL_S = 0.1  # NVML readings
CPU_WINDOW_S = 0.5  # the process tree's CPU %: one figure per window
TREE_REFRESH_S = 5.0  # processes that joined the tree since
# GPU readings sampled every interval (the energy counter is read at the ends only)
SAMPLED = ("utilization_percent", "memory_used_mib", "power_w", "sm_clock_mhz",
           "clock_event_reasons")


def unavailable(reason: str) -> str:
    return f"unavailable: {reason}"


def _stats(values: list[float], *which: str) -> dict:
    pick = {"mean": lambda v: sum(v) / len(v), "max": max, "min": min}
    return {k: round(float(pick[k](values)), 2) for k in which}


class _Tree:
    """The processes under `roots` (roots included): summed CPU seconds and RSS. Each
    process counts from when it is first seen (from its start, if it started after the
    sampler did); one that ends takes its last unread slice of CPU time with it."""

    def __init__(self, roots: list[int], since: float):
        self.since = since  # time.time() at the start
        self.roots, self.procs, self.seen = [], {}, {}
        for pid in roots:
            try:
                self.roots.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                raise ValueError(f"telemetry: no process {pid} to follow") from None
        self.refresh()

    def refresh(self) -> None:
        for root in self.roots:
            try:
                members = [root, *root.children(recursive=True)]
            except psutil.Error:  # the root ended: its children are orphans now
                continue
            for proc in members:
                self.procs.setdefault(proc.pid, proc)

    def read(self) -> tuple[float, float, int]:
        """CPU seconds the tree spent since the last read, its RSS (MiB), its size."""
        spent, rss = 0.0, 0
        for pid, proc in list(self.procs.items()):
            try:
                with proc.oneshot():
                    t, mem = proc.cpu_times(), proc.memory_info()
                    cpu = t.user + t.system
                    if pid not in self.seen:  # new: from zero when it started after us
                        self.seen[pid] = 0.0 if proc.create_time() > self.since else cpu
            except psutil.Error:  # ended (or not ours to read)
                del self.procs[pid]
                continue
            spent += cpu - self.seen[pid]
            self.seen[pid] = cpu
            rss += mem.rss
        return spent, rss / nvml.MIB, len(self.procs)


class Telemetry:
    """Samples from `__enter__` to `__exit__`; `result` is a JSON-ready dict (see
    `columns` for a table row's figures). `device`: "cpu" or a GPU's measured device;
    `server_pids`: the roots of the serving process tree (default: this process)."""

    def __init__(self, device: str, server_pids: list[int] | None = None,
                 interval_s: float = INTERVAL_S):
        if not device:
            raise ValueError("telemetry needs the measured device ('cpu' or a GPU's UUID)")
        self.device = device
        # an empty list: no process here serves (a remote server): none is sampled
        self.pids = list(server_pids) if server_pids is not None else [os.getpid()]
        if any(p is None for p in self.pids):
            raise ValueError(f"telemetry: a server process that is not running ({self.pids})")
        self.interval_s = interval_s
        self._stop = threading.Event()
        self.result: dict = {}

    def __enter__(self) -> Telemetry:
        self._start = time.monotonic()
        self._tree = _Tree(self.pids, time.time())
        self._cpu_windows, self._rss, self._sizes = [], [], []
        self._gpu = self._gpu_failed = None
        self._samples: dict[str, list] = {k: [] for k in SAMPLED}
        self._missing: dict[str, str] = {}
        self._energy = None
        if self.device != "cpu":
            self._open_gpu()
        self._tree.read()  # the baseline
        self._last_tree = self._last_refresh = time.monotonic()
        self._sample_gpu()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def _open_gpu(self) -> None:
        try:
            self._gpu = nvml.Gpu(self.device)
        except nvml.Unavailable as why:
            self._gpu_failed = str(why)
            return
        try:
            self._energy = self._gpu.read("energy_j")
        except nvml.Unavailable as why:
            self._missing["energy_j"] = str(why)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_gpu()
            now = time.monotonic()
            if now - self._last_refresh >= TREE_REFRESH_S:
                self._tree.refresh()
                self._last_refresh = now
            if now - self._last_tree >= CPU_WINDOW_S:
                self._sample_tree(now)

    def _sample_tree(self, now: float, last: bool = False) -> None:
        spent, rss, size = self._tree.read()
        window = now - self._last_tree
        if last and self._cpu_windows and window < CPU_WINDOW_S / 2:
            # a last sliver of a window is a few clock ticks: it joins the one before
            before, length = self._cpu_windows.pop()
            spent, window = spent + before, window + length
        self._cpu_windows.append((spent, window))
        self._rss.append(rss)
        self._sizes.append(size)
        self._last_tree = now

    def _sample_gpu(self) -> None:
        if self._gpu is None:
            return
        for what in SAMPLED:
            if what in self._missing:
                continue
            try:
                self._samples[what].append(self._gpu.read(what))
            except nvml.Unavailable as why:  # not supported here: stop asking
                self._missing[what] = str(why)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        end = time.monotonic()
        self._sample_gpu()
        self._sample_tree(end, last=True)
        duration = end - self._start
        self.result = {"device": self.device, "interval_s": self.interval_s,
                       "duration_s": round(duration, 3),
                       "processes": self._process_result()}
        try:
            if self.device != "cpu":
                self.result["gpu"] = (unavailable(self._gpu_failed) if self._gpu_failed
                                      else self._gpu_result(duration))
        finally:
            if self._gpu is not None:
                self._gpu.close()

    def _process_result(self) -> dict:
        if not self.pids:
            return {"pids": [], "not_sampled": "no process of this host serves"}
        spent = sum(s for s, _ in self._cpu_windows)
        covered = sum(w for _, w in self._cpu_windows)
        windows = [s / w * 100 for s, w in self._cpu_windows if w > 0]
        return {"pids": self.pids, "count_max": max(self._sizes),
                "windows": len(windows),
                # the whole run's share, and the busiest window's
                "cpu_percent": {"mean": round(spent / covered * 100, 1) if covered else 0.0,
                                "max": round(max(windows, default=0.0), 1)},
                "rss_mib": _stats(self._rss, "mean", "max")}

    def _gpu_result(self, duration: float) -> dict:
        out = {"mig": self._gpu.mig,
               "samples": max(len(values) for values in self._samples.values())}
        wanted = {"utilization_percent": ("mean", "max"),
                  "memory_used_mib": ("min", "mean", "max"),
                  "power_w": ("mean", "max"), "sm_clock_mhz": ("mean", "min", "max")}
        for what, stats in wanted.items():
            values = self._samples[what]
            out[what] = (unavailable(self._missing[what]) if what in self._missing
                         else _stats(values, *stats) if values else unavailable("no sample"))
        if "clock_event_reasons" in self._missing:
            out["clock_event_reasons"] = unavailable(self._missing["clock_event_reasons"])
        else:
            out["clock_event_reasons"] = sorted({r for sample in self._samples[
                "clock_event_reasons"] for r in sample})
        if self._gpu.mig:
            out["power_scope"] = "the parent GPU's, shared with its other MIG instances"
        out |= self._energy_result(duration)
        return out

    def _energy_result(self, duration: float) -> dict:
        """The counter's difference where the GPU has one, else the power samples (evenly
        spaced) times the duration."""
        if self._energy is not None:
            try:
                joules = self._gpu.read("energy_j") - self._energy
                return {"energy_j": round(joules, 3), "energy_source": "energy counter"}
            except nvml.Unavailable as why:
                self._missing["energy_j"] = str(why)
        power = self._samples["power_w"]
        if power:
            return {"energy_j": round(sum(power) / len(power) * duration, 3),
                    "energy_source": "power samples"
                    + (f" (counter {self._missing['energy_j']})"
                       if "energy_j" in self._missing else "")}
        return {"energy_j": unavailable(self._missing.get("power_w", "no power sample"))}


def _figure(stats, key: str) -> float:
    """A figure of a result's stats, NaN where it was unavailable."""
    return stats[key] if isinstance(stats, dict) else math.nan


def columns(result: dict, throughput: float) -> dict:
    """A measured row's telemetry columns (tables.PROCESS_TELEMETRY, and on a GPU
    tables.GPU_TELEMETRY): energy per inference is mean power / throughput (mJ)."""
    procs = result["processes"]
    row = ({CPU_MEAN: procs["cpu_percent"]["mean"], CPU_MAX: procs["cpu_percent"]["max"],
            RSS_MEAN: procs["rss_mib"]["mean"], RSS_MAX: procs["rss_mib"]["max"]}
           if "cpu_percent" in procs else dict.fromkeys(PROCESS_TELEMETRY, math.nan))
    if "gpu" not in result:
        return row
    gpu = result["gpu"] if isinstance(result["gpu"], dict) else {}
    power = _figure(gpu.get("power_w"), "mean")
    reasons = gpu.get("clock_event_reasons")
    row |= {GPU_UTIL_MEAN: _figure(gpu.get("utilization_percent"), "mean"),
            GPU_UTIL_MAX: _figure(gpu.get("utilization_percent"), "max"),
            GPU_MEMORY_MAX: _figure(gpu.get("memory_used_mib"), "max"),
            POWER_MEAN: power, SM_CLOCK_MEAN: _figure(gpu.get("sm_clock_mhz"), "mean"),
            ENERGY_PER_INFERENCE: power / throughput * 1e3 if throughput > 0 else math.nan,
            INFERENCES_PER_WATT: throughput / power if power > 0 else math.nan,
            THROTTLE_REASONS: (" ".join(reasons) or "none") if isinstance(reasons, list)
            else ""}
    return row


def with_columns(table: pd.DataFrame, results: list[dict]) -> pd.DataFrame:
    """`table` (one row per result, in order) with each row's telemetry columns after its
    own, the same columns on every row."""
    rows = [columns(r, t) for r, t in zip(results, table[THROUGHPUT])]
    names = PROCESS_TELEMETRY + (GPU_TELEMETRY if any("gpu" in r for r in results) else [])
    extra = pd.DataFrame(rows, columns=names, index=table.index)
    return pd.concat([table, extra], axis=1)
