"""Host load beside a measurement (deploybench.measurement.host_load): CPU burnt by a
process outside the measuring step's tree counts as contention, the step's own children
do not."""

import os
import resource
import subprocess
import sys
import time

import psutil
import pytest

from deploybench.measurement.host_load import CONTENDED_SHARE, HostLoad, contended_cpu

BURN = "import time; end = time.time() + {s}\nwhile time.time() < end: pass"


def test_the_bound_flags_an_overlapping_server_not_a_quiet_host():
    """Others' cores as measured: on 2 CPUs, an overlapping idle server's 0.41 is contention,
    the 0.14 at most of 76 quiet committed levels is not; on a 16-CPU GPU host, the 0.45 of
    a quiet online sweep is not, three busy cores are."""
    assert contended_cpu(0.41, 2) and not contended_cpu(0.14, 2)
    assert not contended_cpu(0.45, 16) and contended_cpu(3.0, 16)
    # the bound itself: 1/8 of a core per CPU, strictly above it (0.25 of 2 CPUs, 2 of 16)
    assert CONTENDED_SHARE == 1 / 8
    assert not contended_cpu(0.25, 2) and contended_cpu(0.2501, 2)
    assert not contended_cpu(2.0, 16) and contended_cpu(2.001, 16)
    assert not contended_cpu(0.125, 1) and contended_cpu(0.126, 1)


def test_a_busy_neighbour_is_contention():
    burners = int(CONTENDED_SHARE * os.cpu_count()) + 1  # past the bound: 1 below 16 CPUs
    for _ in range(burners):  # sh starts each in the background and exits: nobody's child
        subprocess.run(["sh", "-c", f"{sys.executable} -c '{BURN.format(s=2.3)}' &"],
                       check=True)
    time.sleep(0.3)
    with HostLoad() as load:
        time.sleep(1.5)
    assert load.result["other_cpu_cores"] > 0.7 * burners, load.result
    assert load.result["contended"], load.result
    time.sleep(0.6)  # the burners are done


PINNED_BURN = "import os, time; os.sched_setaffinity(0, {{{cpu}}}); " + BURN


BUSY = ("user", "nice", "system", "irq", "softirq", "steal")


def _pinned_load(burn_on: int | None) -> tuple[dict, list[float]]:
    """HostLoad of this process over 1.2 s, with a burner pinned to CPU `burn_on` (None:
    none) started just before; and each CPU's busy cores over the same span, as the kernel
    counts them."""
    if burn_on is not None:
        code = PINNED_BURN.format(cpu=burn_on, s=1.6)
        subprocess.run(["sh", "-c", f"{sys.executable} -c '{code}' &"], check=True)
        time.sleep(0.2)
    before, start = psutil.cpu_times(percpu=True), time.monotonic()
    with HostLoad() as load:
        time.sleep(1.2)
    after, wall = psutil.cpu_times(percpu=True), time.monotonic() - start
    busy = [sum(getattr(b, f, 0.0) - getattr(a, f, 0.0) for f in BUSY) / wall
            for a, b in zip(before, after)]
    if burn_on is not None:
        time.sleep(0.3)  # the burner is done
    return load.result, busy


def test_a_pinned_step_counts_only_its_own_cpus():
    """A step pinned to some CPUs (one GPU's share of a host running a job per GPU) is
    contended by a neighbour on its CPUs, not by one on the others. Whatever else loads the
    host, the others' cores it reads are its CPU's busy time over the same span (the kernel's
    count, read beside it), never the host's: with a burner on the other CPU, the host's
    count is a core higher."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    mine, theirs = cpus[0], cpus[1]
    try:
        os.sched_setaffinity(0, {mine})
        beside, busy_beside = _pinned_load(theirs)
        on_mine, _ = _pinned_load(mine)
    finally:
        os.sched_setaffinity(0, cpus)
    assert beside["pinned_cpus"] == [mine] and on_mine["pinned_cpus"] == [mine]
    own = beside["own_cpu_cores"]
    assert beside["other_cpu_cores"] == pytest.approx(busy_beside[mine] - own, abs=0.1)
    assert sum(busy_beside) - busy_beside[mine] > 0.7, busy_beside  # the burner ran there
    assert on_mine["other_cpu_cores"] > 0.7 and on_mine["contended"], on_mine


def test_the_others_share_is_read_from_the_pinned_cpus_alone(monkeypatch):
    """Known per-CPU busy times over 2 s of wall time: a step pinned to CPU 0 of 4 counts
    CPU 0's 0.6 s less its own 0.1 s (0.25 cores: above 1/8 of its one CPU), not the 4.0 s
    the other CPUs burned; unpinned, all 4.6 s less its own over 4 CPUs (2.25 cores, above
    0.5). Contended exactly above CONTENDED_SHARE of the CPUs it may run on."""
    from types import SimpleNamespace

    from deploybench.measurement import host_load

    busy = {"start": [1.0, 5.0, 5.0, 2.0], "end": [1.6, 7.0, 7.0, 2.0]}
    clock = {"now": "start"}

    def cpu_times(percpu=False):
        per_cpu = [SimpleNamespace(user=b, system=0.0) for b in busy[clock["now"]]]
        return per_cpu if percpu else SimpleNamespace(user=sum(busy[clock["now"]]),
                                                      system=0.0)

    monkeypatch.setattr(host_load.psutil, "cpu_times", cpu_times)
    monkeypatch.setattr(host_load, "_own_seconds",
                        lambda: {"start": 3.0, "end": 3.1}[clock["now"]])
    monkeypatch.setattr(host_load.time, "monotonic",
                        lambda: {"start": 100.0, "end": 102.0}[clock["now"]])
    for affinity, cores, contended in (({0}, 0.25, True), ({0, 1, 2, 3}, 2.25, True)):
        monkeypatch.setattr(host_load.os, "sched_getaffinity", lambda _, a=affinity: a)
        clock["now"] = "start"
        with HostLoad() as load:
            clock["now"] = "end"
        assert load.result["other_cpu_cores"] == cores, (affinity, load.result)
        assert load.result["own_cpu_cores"] == 0.05
        assert load.result["contended"] is contended
        assert load.result["pinned_cpus"] == (sorted(affinity) if len(affinity) < 4 else None)
    busy["end"] = [1.3, 7.0, 7.0, 2.0]  # 0.1 cores on CPU 0: below 1/8 of one CPU
    monkeypatch.setattr(host_load.os, "sched_getaffinity", lambda _: {0})
    clock["now"] = "start"
    with HostLoad() as load:
        clock["now"] = "end"
    assert (load.result["other_cpu_cores"], load.result["contended"]) == (0.1, False)


def test_the_steps_own_processes_are_not_contention():
    """The child's CPU is the step's own, whatever else the host runs (the others' share
    is only asserted on an otherwise quiet host)."""
    quiet = os.getloadavg()[0] < 0.5
    start = time.monotonic()
    with HostLoad() as load:  # a child burning a core, as perf_analyzer or a server would
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", BURN.format(s=1.5)], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - start
    child = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert child > 0.5, child  # it burned
    assert load.result["own_cpu_cores"] * wall >= 0.9 * child, (load.result, child, wall)
    assert load.result["load_average_1m"] >= 0
    if quiet:
        assert not load.result["contended"], load.result


def test_other_gpu_processes_leave_out_the_steps_own_and_say_what_they_cannot_see(
        monkeypatch):
    """NVML lists this process (the step's own), pid 1 (another's, seen here) and a pid this
    namespace lacks (seen: false, not counted: it may be the step's own server seen from the
    host); at the end one more. Contended: a seen process beside the measurement."""
    import contextlib

    from deploybench.measurement import host_load

    listed = [[{"pid": os.getpid(), "used_mib": 100}, {"pid": 1, "used_mib": 10},
               {"pid": 2**22 + 7, "used_mib": 5}]]

    @contextlib.contextmanager
    def gpu(device):
        if device == "GPU-gone":
            raise host_load.nvml.Unavailable("no NVML")
        yield type("G", (), {"processes": lambda self: [dict(p) for p in listed[0]]})()

    monkeypatch.setattr(host_load.nvml, "Gpu", gpu)
    found = host_load.other_gpu_processes("GPU-x")
    assert [(p["pid"], p["seen"]) for p in found] == [(1, True), (2**22 + 7, False)]
    assert found[0]["name"] and found[1]["name"] is None
    assert host_load.other_gpu_processes("GPU-gone") == "unavailable: no NVML"
    with HostLoad("GPU-x") as load:
        listed[0] = [{"pid": 1, "used_mib": 30}]  # pid 1 grew; the other went
    assert [(p["pid"], p["used_mib"]) for p in load.result["other_gpu_processes"]] == [
        (1, 30), (2**22 + 7, 5)]
    assert load.result["contended"]
    listed[0] = [{"pid": 2**22 + 7, "used_mib": 5}]
    with HostLoad("GPU-x") as load:
        pass
    # a process this namespace cannot see is no contention: only the CPU's may flag it
    assert load.result["contended"] is contended_cpu(load.result["other_cpu_cores"],
                                                     os.cpu_count())
    with HostLoad(["GPU-x", "GPU-gone"]) as load:
        pass
    assert load.result["other_gpu_processes"] == "unavailable: no NVML"


def test_busy_time_is_every_field_but_idle_and_the_tree_counts_its_childrens_time(monkeypatch):
    """Busy CPU time: user, nice, system, irq, softirq and steal, not idle, iowait or guest
    (already in user); a field a platform lacks counts 0. The step's tree: each process's
    user and system time with its waited-for children's, a process gone since it was
    listed left out (its time is its parent's now). Beside them, the load average and the
    host's CPU count as they are."""
    from types import SimpleNamespace

    from deploybench.measurement import host_load

    times = SimpleNamespace(user=1.0, nice=2.0, system=4.0, irq=8.0, softirq=16.0,
                            steal=32.0, idle=64.0, iowait=128.0, guest=256.0)
    assert host_load._busy(times) == 63.0
    assert host_load._busy(SimpleNamespace(user=1.0, system=4.0, idle=64.0)) == 5.0

    class Proc:
        def __init__(self, user, system, children_user, children_system, gone=False):
            self.times = SimpleNamespace(user=user, system=system,
                                         children_user=children_user,
                                         children_system=children_system)
            self.gone = gone

        def cpu_times(self):
            if self.gone:
                raise psutil.NoSuchProcess(42)
            return self.times

    tree = [Proc(1.0, 2.0, 4.0, 8.0), Proc(16.0, 32.0, 0.0, 0.0), Proc(64.0, 0, 0, 0, True)]
    monkeypatch.setattr(host_load, "_own_tree", lambda: tree)
    assert host_load._own_seconds() == 63.0
    monkeypatch.setattr(host_load.os, "getloadavg", lambda: (3.14159, 2.0, 1.0))
    monkeypatch.setattr(host_load.os, "cpu_count", lambda: 6)
    with HostLoad() as load:
        pass
    assert load.result["load_average_1m"] == 3.14 and load.result["host_cpus"] == 6
