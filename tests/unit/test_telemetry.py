"""Telemetry beside a measurement (deploybench.measurement.telemetry): the CPU and memory of a real
process tree, NVML's absence recorded instead of failing, and the columns a row gets.
The GPU readings themselves are tested on a GPU (tests/gpu/test_gpu_runners.py)."""

import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import psutil
import pytest

from deploybench.measurement import telemetry
from deploybench.measurement.host_load import HostLoad
from deploybench.measurement.telemetry import Telemetry
from deploybench.records.tables import (
    ENERGY_PER_INFERENCE,
    GPU_TELEMETRY,
    INFERENCES_PER_WATT,
    PERF_COLUMNS,
    PROCESS_TELEMETRY,
    THROTTLE_REASONS,
    THROUGHPUT,
    measured_columns,
)

# A server-like tree: a parent that waits on a child doing the work (or sleeping)
TREE = ("import subprocess, sys; subprocess.run([sys.executable, '-c', {work!r}])")
SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
SLEEP = "import time; time.sleep(30)"
NO_GPU = "GPU-00000000-0000-0000-0000-000000000000"  # no such GPU anywhere


def sampled(work: str, seconds: float = 2.5) -> dict:
    """Telemetry of a fresh two-process tree doing `work`, once the child runs."""
    parent = subprocess.Popen([sys.executable, "-c", TREE.format(work=work)])
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(parent.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        with Telemetry("cpu", server_pids=[parent.pid]) as usage:
            time.sleep(seconds)
        return usage.result
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()


def check_consistent(result: dict, seconds: float) -> None:
    procs = result["processes"]
    assert procs["count_max"] == 2, procs  # the parent and the child it waits on
    assert abs(result["duration_s"] - seconds) < 0.5, result
    # one CPU window per 0.5 s (the last sliver joins the one before)
    assert abs(procs["windows"] - seconds / telemetry.CPU_WINDOW_S) <= 1, procs
    cpu, rss = procs["cpu_percent"], procs["rss_mib"]
    assert 0 <= cpu["mean"] <= cpu["max"] <= 100 * os.cpu_count(), cpu
    # two Python interpreters: several MiB each, far below the host's memory
    assert 10 < rss["mean"] <= rss["max"] < psutil.virtual_memory().total / 2**20, rss
    assert "gpu" not in result  # the cpu key: no NVML at all


def test_a_tree_that_burns_cpu_reports_more_than_an_idle_one():
    with ThreadPoolExecutor(2) as pool:  # side by side: each samples its own tree
        busy, idle = pool.map(sampled, (SPIN, SLEEP), (1.5, 1.5))
    for result in (busy, idle):
        check_consistent(result, 1.5)
    busy_cpu, idle_cpu = busy["processes"]["cpu_percent"], idle["processes"]["cpu_percent"]
    # the spinning grandchild is counted (a shared 2-core machine gives it at least a third
    # of a core); the sleeping one next to nothing
    assert busy_cpu["mean"] > 30 and idle_cpu["mean"] < 5, (busy_cpu, idle_cpu)
    assert busy_cpu["mean"] > idle_cpu["max"]


def test_without_nvml_a_gpu_row_says_why_and_still_measures():
    """No NVML library (this machine), or a GPU NVML does not know: the row's GPU columns
    are empty, its JSON says why, the process figures are there."""
    with Telemetry(NO_GPU) as usage:  # this process
        sum(i * i for i in range(2_000_000))
    gpu = usage.result["gpu"]
    assert isinstance(gpu, str) and gpu.startswith("unavailable: NVML: "), gpu
    assert usage.result["processes"]["pids"] == [os.getpid()]
    assert usage.result["processes"]["cpu_percent"]["mean"] > 0
    row = telemetry.columns(usage.result, throughput=100.0)
    assert list(row) == PROCESS_TELEMETRY + GPU_TELEMETRY
    assert all(math.isnan(row[c]) for c in GPU_TELEMETRY if c != THROTTLE_REASONS)
    assert row[THROTTLE_REASONS] == ""
    with HostLoad(NO_GPU) as load:
        time.sleep(0.2)
    assert load.result["other_gpu_processes"].startswith("unavailable: NVML: ")
    assert load.result["contended"] == (load.result["other_cpu_cores"] > 0.5)


def test_energy_per_inference_and_per_watt_come_from_mean_power_and_throughput():
    result = {"processes": {"cpu_percent": {"mean": 80.0, "max": 95.0},
                            "rss_mib": {"mean": 500.0, "max": 510.0}},
              "gpu": {"utilization_percent": {"mean": 60.0, "max": 99.0},
                      "memory_used_mib": {"min": 1000.0, "mean": 1500.0, "max": 2000.0},
                      "power_w": {"mean": 250.0, "max": 300.0},
                      "sm_clock_mhz": {"mean": 1755.0, "min": 1500.0, "max": 1980.0},
                      "clock_event_reasons": ["gpu_idle", "sw_power_cap"]}}
    for throughput in (1000.0, 50_000.0):
        row = telemetry.columns(result, throughput)
        assert row[ENERGY_PER_INFERENCE] * 1e-3 * throughput == pytest.approx(250.0)
        assert row[INFERENCES_PER_WATT] * 250.0 == pytest.approx(throughput)
    assert row[THROTTLE_REASONS] == "gpu_idle sw_power_cap"
    # MIG: utilisation unavailable there, the rest still derived
    mig = {**result, "gpu": {**result["gpu"],
                             "utilization_percent": "unavailable: NVML: Not Supported"}}
    row = telemetry.columns(mig, 1000.0)
    assert math.isnan(row["GPU utilization mean (%)"]) and row[ENERGY_PER_INFERENCE] == 250.0


def test_telemetry_columns_follow_the_measured_ones_and_come_off_again():
    table = pd.DataFrame([[b, 1, 100.0 * b] + [1.0] * (len(PERF_COLUMNS) - 3)
                          for b in (1, 4)], columns=PERF_COLUMNS)
    with Telemetry("cpu") as usage:
        time.sleep(0.1)
    both = telemetry.with_columns(table, [usage.result, usage.result])
    assert list(both.columns) == PERF_COLUMNS + PROCESS_TELEMETRY
    assert both[THROUGHPUT].tolist() == [100.0, 400.0]
    pd.testing.assert_frame_equal(measured_columns(both), table)


def test_bad_input_is_refused_before_sampling():
    with pytest.raises(ValueError, match="measured device"):
        Telemetry("")
    with pytest.raises(ValueError, match="not running"):
        Telemetry("cpu", server_pids=[None])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(ValueError, match=f"no process {gone.pid}"), Telemetry(
            "cpu", server_pids=[gone.pid]):
        pass


def test_the_report_shows_gpu_rows_and_what_nvml_could_not_give(tmp_path):
    """A MIG instance's rows (utilisation unavailable there) and a neighbour on the GPU, as
    the configuration report's Telemetry and Host load sections show them."""
    from deploybench.reporting.conditions import host_load_section as _host_load
    from deploybench.reporting.conditions import telemetry_section as _telemetry

    gpu = {"mig": True, "samples": 30, "utilization_percent": "unavailable: NVML: Not Supported",
           "memory_used_mib": {"min": 900.0, "mean": 950.0, "max": 1000.0},
           "power_w": {"mean": 200.0, "max": 210.0},
           "sm_clock_mhz": {"mean": 1980.0, "min": 1980.0, "max": 1980.0},
           "clock_event_reasons": [], "energy_j": 600.0, "energy_source": "energy counter"}
    result = {"device": "MIG-x", "processes": {"cpu_percent": {"mean": 90.0, "max": 99.0},
                                               "rss_mib": {"mean": 700.0, "max": 701.0}},
              "gpu": gpu}
    files, reports = {}, {}
    for scenario in ("offline", "online", "native"):
        table = pd.DataFrame({"Batch": [1, 8], "Concurrency": [1, 1], THROUGHPUT: [400.0, 2e3]})
        if scenario == "native":
            table = table.drop(columns="Concurrency")
        files[scenario] = tmp_path / f"{scenario}.csv"
        telemetry.with_columns(table, [result, result]).to_csv(files[scenario], index=False)
        reports[scenario] = {"telemetry": [{"Batch": b, **result} for b in (1, 8)]}
    section = _telemetry(files, *reports.values())
    assert "On the GPU, through NVML" in section
    assert "Not available here: utilization percent: NVML: Not Supported." in section
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
             if line.startswith("| ")]
    assert lines[0] == ["Scenario", "Batch", "Concurrency", *PROCESS_TELEMETRY, *GPU_TELEMETRY]
    offline = [dict(zip(lines[0], cells)) for cells in lines[1:] if cells[0] == "offline"]
    # 200 W at 400 and 2000 inf/s: 500 and 100 mJ an inference, 2 and 10 inf/s per W
    assert [(r[ENERGY_PER_INFERENCE], r[INFERENCES_PER_WATT], r[THROTTLE_REASONS])
            for r in offline] == [("500.0", "2", "none"), ("100.0", "10", "none")]
    assert all(r["GPU utilization mean (%)"] == "" for r in offline)  # NaN: not measured
    load = {"other_cpu_cores": 0.1, "load_average_1m": 0.5, "host_cpus": 16,
            "contended": True, "other_gpu_processes": [
                {"pid": 4242, "kind": "compute", "used_mib": 512.0, "name": "python3",
                 "seen": True}]}
    section = _host_load({"host_load": [{"Batch": 1, **load}]}, {}, {"host_load": {
        **load, "contended": False, "other_gpu_processes": []}})
    assert "**1 of 2 measurements ran beside other load**" in section
    assert "or another process on the GPU" in section
    assert "| 4242 python3 (512 MiB) |" in section and "| none |" in section


def test_a_deployment_over_two_gpus_is_sampled_on_each_and_summed():
    """Telemetry of a deployment over several GPUs: each GPU's readings (`gpus`), and
    the deployment's (`gpu`): utilisation and clock their mean, memory, power and energy
    their sum, so energy per inference stays the deployment's."""
    one = {"mig": False, "samples": 10, "utilization_percent": {"mean": 80.0, "max": 95.0},
           "memory_used_mib": {"min": 1000.0, "mean": 1200.0, "max": 1500.0},
           "power_w": {"mean": 300.0, "max": 350.0},
           "sm_clock_mhz": {"mean": 1980.0, "min": 1900.0, "max": 1980.0},
           "clock_event_reasons": ["none"], "energy_j": 3000.0,
           "energy_source": "energy counter"}
    two = {**one, "samples": 9, "utilization_percent": {"mean": 60.0, "max": 90.0},
           "power_w": {"mean": 200.0, "max": 260.0}, "clock_event_reasons": ["sw_power_cap"],
           "energy_j": 2000.0}
    both = telemetry.combined([one, two])
    assert both["gpus"] == 2 and both["samples"] == 9
    assert both["utilization_percent"] == {"mean": 70.0, "max": 95.0}
    assert both["power_w"] == {"mean": 500.0, "max": 610.0}
    assert both["memory_used_mib"]["max"] == 3000.0 and both["energy_j"] == 5000.0
    assert both["clock_event_reasons"] == ["none", "sw_power_cap"]
    row = telemetry.columns({"processes": {"pids": []}, "gpu": both}, throughput=1000.0)
    assert row[ENERGY_PER_INFERENCE] == 500.0  # 500 W over 1,000 inf/s: 0.5 J each
    # a GPU lacking a figure leaves the deployment's unavailable, not understated
    lacking = telemetry.combined([one, {**two, "power_w": "unavailable: NVML: no power"}])
    assert lacking["power_w"] == "unavailable: NVML: no power"
    with Telemetry([NO_GPU, NO_GPU + "-2"]) as usage:  # no NVML here: each one says why
        time.sleep(0.1)
    assert set(usage.result["gpus"]) == {NO_GPU, NO_GPU + "-2"}
    assert usage.result["gpu"].startswith("unavailable: NVML: ")
