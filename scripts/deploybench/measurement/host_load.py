"""What else ran on the host while a measurement ran: the CPU that processes outside this
step's own process tree (the step, its server and stubs, its perf_analyzer runs) used on
the CPUs the step may run on (all of the host's unless it is pinned to some),
the load average, and on a GPU the other processes NVML lists on it. A level measured
beside a busy neighbour is flagged: on 2026-11-23 a CPU native run measured beside other
heavy processes came out 2.45x below the served one."""

from __future__ import annotations

import os
import time

import psutil

from ..records.facts import CONTENDED_SHARE
from . import nvml


def contended_cpu(other_cores: float, cpus: int) -> bool:
    """Whether others' CPU, in cores, is contention for a step that may run on `cpus`."""
    return other_cores > CONTENDED_SHARE * cpus


def _busy(t) -> float:
    return sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq",
                                             "steal"))


def pinned_cpus() -> list[int] | None:
    """The CPUs this step may run on where it is pinned to some of the host's (taskset,
    a cgroup cpuset: one GPU's share of a host running a job per GPU); None where it may
    run on all of them."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus if len(cpus) < len(psutil.cpu_times(percpu=True)) else None


def _busy_seconds(cpus: list[int] | None) -> float:
    """CPU seconds the CPUs this step may run on have spent busy (everything but
    idle/iowait): another process on CPUs the step cannot use takes nothing from it."""
    if cpus is None:
        return _busy(psutil.cpu_times())
    per_cpu = psutil.cpu_times(percpu=True)
    return sum(_busy(per_cpu[i]) for i in cpus if i < len(per_cpu))


def _own_tree() -> list[psutil.Process]:
    """This process and every live descendant (the server, its stubs, perf_analyzer)."""
    me = psutil.Process()
    return [me, *me.children(recursive=True)]


def _own_seconds() -> float:
    """CPU seconds of this process tree: this process with its waited-for children, and
    every live descendant with theirs."""
    total = 0.0
    for proc in _own_tree():
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended since listed: its time is its parent's now
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def other_gpu_processes(device: str) -> list[dict] | str:
    """The compute and graphics processes on the measured GPU (a MIG instance: its own)
    outside this step's process tree, with their names; "unavailable: <reason>" where
    NVML cannot say. A pid NVML lists that this PID namespace does not have (NVML gives a
    container the host's pids) is listed with `seen: false` and is not counted as another
    process: it may be this step's own server."""
    try:
        with nvml.Gpu(device) as gpu:
            listed = gpu.processes()
    except nvml.Unavailable as why:
        return f"unavailable: {why}"
    own = {p.pid for p in _own_tree()}
    others = []
    for entry in listed:
        if entry["pid"] in own:
            continue
        try:
            entry |= {"name": psutil.Process(entry["pid"]).name(), "seen": True}
        except psutil.NoSuchProcess:
            entry |= {"name": None, "seen": False}
        except psutil.AccessDenied:  # another user's
            entry |= {"name": None, "seen": True}
        others.append(entry)
    return others


class HostLoad:
    """`with HostLoad(device) as load: ...` then `load.result`: the others' CPU in cores,
    the 1-minute load average at the end, on a GPU the other processes on it (listed at
    the start and at the end), and whether that is contention."""

    def __init__(self, device: str | list[str] = "cpu"):
        self.devices = [device] if isinstance(device, str) else list(device)
        self.device = self.devices[0]  # a deployment over several GPUs: each one's

    def __enter__(self) -> HostLoad:
        self._gpu_start = None if self.device == "cpu" else self._gpu_processes()
        self._cpus = pinned_cpus()
        self._start = time.monotonic(), _busy_seconds(self._cpus), _own_seconds()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self._start[0]
        own = _own_seconds() - self._start[2]
        others = (_busy_seconds(self._cpus) - self._start[1]) - own
        cores = max(0.0, others) / wall if wall > 0 else 0.0
        cpus = len(self._cpus or psutil.cpu_times(percpu=True))
        self.result = {"other_cpu_cores": round(cores, 2),
                       "own_cpu_cores": round(own / wall, 2) if wall > 0 else 0.0,
                       "load_average_1m": round(os.getloadavg()[0], 2),
                       "host_cpus": os.cpu_count(),
                       "pinned_cpus": self._cpus,
                       "contended": contended_cpu(cores, cpus)}
        if self.device != "cpu":
            gpu = _union(self._gpu_start, self._gpu_processes())
            self.result["other_gpu_processes"] = gpu
            self.result["contended"] |= isinstance(gpu, list) and any(p["seen"] for p in gpu)

    def _gpu_processes(self) -> list[dict] | str:
        """Other processes on any of the measured GPUs, or why NVML cannot say."""
        found = [other_gpu_processes(d) for d in self.devices]
        lists = [f for f in found if isinstance(f, list)]
        return [p for f in lists for p in f] if len(lists) == len(found) else next(
            f for f in found if isinstance(f, str))


def _union(start: list[dict] | str, end: list[dict] | str) -> list[dict] | str:
    """The processes listed at either end (by pid, the larger memory), or the reason
    neither list could be had."""
    lists = [found for found in (start, end) if isinstance(found, list)]
    if not lists:
        return end
    merged: dict[int, dict] = {}
    for found in lists:
        for entry in found:
            kept = merged.setdefault(entry["pid"], entry)
            if (entry.get("used_mib") or 0) > (kept.get("used_mib") or 0):
                merged[entry["pid"]] = entry
    return sorted(merged.values(), key=lambda p: p["pid"])
