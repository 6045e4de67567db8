"""Host load beside a measurement (deploybench.measurement.host_load): CPU burnt by a
process outside the measuring step's tree counts as contention, the step's own children
do not."""

import os
import resource
import subprocess
import sys
import time

import pytest

from deploybench.measurement.host_load import CONTENDED_SHARE, HostLoad, contended_cpu

BURN = "import time; end = time.time() + {s}\nwhile time.time() < end: pass"


def test_the_bound_flags_an_overlapping_server_not_a_quiet_host():
    """Others' cores as measured: on 2 CPUs, an overlapping idle server's 0.41 is contention,
    the 0.14 at most of 76 quiet committed levels is not; on a 16-CPU GPU host, the 0.45 of
    a quiet online sweep is not, three busy cores are."""
    assert contended_cpu(0.41, 2) and not contended_cpu(0.14, 2)
    assert not contended_cpu(0.45, 16) and contended_cpu(3.0, 16)


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


def test_a_pinned_step_counts_only_its_own_cpus():
    """A step pinned to some CPUs (one GPU's share of a host running a job per GPU) is
    contended by a neighbour on its CPUs, not by one on the others."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    mine, theirs = cpus[0], cpus[1]
    results = {}
    try:
        os.sched_setaffinity(0, {mine})
        for where in (theirs, mine):
            code = PINNED_BURN.format(cpu=where, s=1.6)
            subprocess.run(["sh", "-c", f"{sys.executable} -c '{code}' &"], check=True)
            time.sleep(0.2)
            with HostLoad() as load:
                time.sleep(1.2)
            results[where] = load.result
            time.sleep(0.3)  # the burner is done
    finally:
        os.sched_setaffinity(0, cpus)
    assert results[mine]["pinned_cpus"] == [mine]
    assert results[mine]["other_cpu_cores"] > 0.7 and results[mine]["contended"], results
    assert results[theirs]["other_cpu_cores"] < results[mine]["other_cpu_cores"] - 0.5, results


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


def test_repeats_keep_the_median_run_and_flag_a_wide_spread():
    from deploybench.measurement.repeats import median_run, spread

    runs = [{"Inferences/Second": v, "p99 latency (ms)": i} for i, v in
            enumerate([105.0, 95.0, 100.0, 130.0])]
    assert median_run(runs) == {"Inferences/Second": 100.0, "p99 latency (ms)": 2}
    steady = spread([100.0, 102.0, 98.0], stability_percentage=10)
    assert steady["median"] == 100.0 and not steady["noisy"] and steady["range_pct"] == 4.0
    assert 98.0 <= steady["ci95"][0] <= 100.0 <= steady["ci95"][1] <= 102.0
    wide = spread([100.0, 130.0, 95.0], stability_percentage=10)
    assert wide["noisy"] and wide["range_pct"] == 35.0
