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

from ..records.tables import (
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


class _GpuSampler:
    """One GPU's NVML readings over a measurement (a reading it cannot give: recorded
    as missing, no longer asked for)."""

    def __init__(self, device: str):
        self.device, self.gpu, self.failed, self.energy = device, None, None, None
        self.samples: dict[str, list] = {k: [] for k in SAMPLED}
        self.missing: dict[str, str] = {}
        try:
            self.gpu = nvml.Gpu(device)
        except nvml.Unavailable as why:
            self.failed = str(why)
            return
        try:
            self.energy = self.gpu.read("energy_j")
        except nvml.Unavailable as why:
            self.missing["energy_j"] = str(why)

    def sample(self) -> None:
        if self.gpu is None:
            return
        for what in SAMPLED:
            if what in self.missing:
                continue
            try:
                self.samples[what].append(self.gpu.read(what))
            except nvml.Unavailable as why:  # not supported here: stop asking
                self.missing[what] = str(why)

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()

    def result(self, duration: float) -> dict | str:
        if self.failed:
            return unavailable(self.failed)
        out = {"mig": self.gpu.mig,
               "samples": max(len(values) for values in self.samples.values())}
        wanted = {"utilization_percent": ("mean", "max"),
                  "memory_used_mib": ("min", "mean", "max"),
                  "power_w": ("mean", "max"), "sm_clock_mhz": ("mean", "min", "max")}
        for what, stats in wanted.items():
            values = self.samples[what]
            out[what] = (unavailable(self.missing[what]) if what in self.missing
                         else _stats(values, *stats) if values else unavailable("no sample"))
        if "clock_event_reasons" in self.missing:
            out["clock_event_reasons"] = unavailable(self.missing["clock_event_reasons"])
        else:
            out["clock_event_reasons"] = sorted({r for sample in self.samples[
                "clock_event_reasons"] for r in sample})
        if self.gpu.mig:
            out["power_scope"] = "the parent GPU's, shared with its other MIG instances"
        return out | self._energy_result(duration)

    def _energy_result(self, duration: float) -> dict:
        """The counter's difference where the GPU has one, else the power samples (evenly
        spaced) times the duration."""
        if self.energy is not None:
            try:
                joules = self.gpu.read("energy_j") - self.energy
                return {"energy_j": round(joules, 3), "energy_source": "energy counter"}
            except nvml.Unavailable as why:
                self.missing["energy_j"] = str(why)
        power = self.samples["power_w"]
        if power:
            return {"energy_j": round(sum(power) / len(power) * duration, 3),
                    "energy_source": "power samples"
                    + (f" (counter {self.missing['energy_j']})"
                       if "energy_j" in self.missing else "")}
        return {"energy_j": unavailable(self.missing.get("power_w", "no power sample"))}


# How the GPUs of a deployment over several add up: the deployment's utilisation and
# clock are their mean, its memory, power and energy their sum
_COMBINED = {"utilization_percent": {"mean": "mean", "max": "max"},
             "memory_used_mib": {"min": "sum", "mean": "sum", "max": "sum"},
             "power_w": {"mean": "sum", "max": "sum"},
             "sm_clock_mhz": {"mean": "mean", "min": "min", "max": "max"}}
_HOW = {"mean": lambda v: sum(v) / len(v), "sum": sum, "min": min, "max": max}


def combined(results: list) -> dict | str:
    """One figure set for a deployment over several GPUs from each GPU's result (see
    _COMBINED; clock event reasons: any GPU's); a figure any GPU lacks is unavailable."""
    failed = [r for r in results if not isinstance(r, dict)]
    if failed:
        return failed[0]
    out = {"gpus": len(results), "samples": min(r["samples"] for r in results)}
    for what, stats in _COMBINED.items():
        lacking = [r[what] for r in results if not isinstance(r[what], dict)]
        out[what] = lacking[0] if lacking else {
            k: round(float(_HOW[how]([r[what][k] for r in results])), 2)
            for k, how in stats.items()}
    reasons = [r["clock_event_reasons"] for r in results]
    out["clock_event_reasons"] = (sorted(set().union(*reasons)) if all(
        isinstance(x, list) for x in reasons) else next(x for x in reasons if isinstance(x, str)))
    energy = [r["energy_j"] for r in results]
    out["energy_j"] = (round(sum(energy), 3) if all(isinstance(e, (int, float)) for e in energy)
                       else next(e for e in energy if isinstance(e, str)))
    return out


class Telemetry:
    """Samples from `__enter__` to `__exit__`; `result` is a JSON-ready dict (see
    `columns` for a table row's figures). `device`: "cpu" or a GPU's measured device, or
    the GPUs of a deployment over several (a list: `gpu` their sum, `gpus` each one's);
    `server_pids`: the roots of the serving process tree (default: this process)."""

    def __init__(self, device: str | list[str], server_pids: list[int] | None = None,
                 interval_s: float = INTERVAL_S):
        self.devices = [device] if isinstance(device, str) else list(device)
        if not all(self.devices) or not self.devices:
            raise ValueError("telemetry needs the measured device ('cpu' or a GPU's UUID)")
        self.device = self.devices[0]
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
        self._gpus = [] if self.device == "cpu" else [_GpuSampler(d) for d in self.devices]
        self._tree.read()  # the baseline
        self._last_tree = self._last_refresh = time.monotonic()
        self._sample_gpus()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def _sample_gpus(self) -> None:
        for gpu in self._gpus:
            gpu.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_gpus()
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

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        end = time.monotonic()
        self._sample_gpus()
        self._sample_tree(end, last=True)
        duration = end - self._start
        self.result = {"device": self.device, "interval_s": self.interval_s,
                       "duration_s": round(duration, 3),
                       "processes": self._process_result()}
        try:
            results = [gpu.result(duration) for gpu in self._gpus]
            if len(results) == 1:
                self.result["gpu"] = results[0]
            elif results:
                self.result["gpu"] = combined(results)
                self.result["gpus"] = dict(zip(self.devices, results))
        finally:
            for gpu in self._gpus:
                gpu.close()

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
