"""What else ran on the host while a measurement ran: the CPU that processes outside this
step's own process tree (the step, its server and stubs, its perf_analyzer runs) used,
and the load average. A level measured beside a busy neighbour is flagged: on 2026-11-23 a
CPU native run measured beside other heavy processes came out 2.45x below the served one."""

from __future__ import annotations

import os
import time

import psutil

# Other processes' CPU, in cores on average over a measurement, from which it is flagged
CONTENDED_CORES = 0.5


def _busy_seconds() -> float:
    """CPU seconds the whole host has spent busy (every CPU, everything but idle/iowait)."""
    t = psutil.cpu_times()
    return sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq",
                                             "steal"))


def _own_seconds() -> float:
    """CPU seconds of this process tree: this process with its waited-for children, and
    every live descendant with theirs."""
    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended since listed: its time is its parent's now
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


class HostLoad:
    """`with HostLoad() as load: ...` then `load.result`: the others' CPU in cores, the
    1-minute load average at the end, and whether that is contention."""

    def __enter__(self) -> HostLoad:
        self._start = time.monotonic(), _busy_seconds(), _own_seconds()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self._start[0]
        others = (_busy_seconds() - self._start[1]) - (_own_seconds() - self._start[2])
        cores = max(0.0, others) / wall if wall > 0 else 0.0
        self.result = {"other_cpu_cores": round(cores, 2),
                       "load_average_1m": round(os.getloadavg()[0], 2),
                       "host_cpus": os.cpu_count(),
                       "contended": cores > CONTENDED_CORES}
