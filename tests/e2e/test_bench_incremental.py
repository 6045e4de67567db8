"""scripts/benchmarks/bench_incremental.py in its smoke mode: the tests' tiny matrix on the cpu key
planned by the real Snakemake, marked built, then re-planned after each change."""

import re
import subprocess
import sys

from bench_incremental import SMOKE_MATRIX

from deploybench.settings.resolve import Settings
from testkit.workflow import ROOT, main_config


def test_smoke_run_prints_consistent_job_counts():
    result = subprocess.run([sys.executable, str(ROOT / "scripts/benchmarks/bench_incremental.py"),
                             "--smoke"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {m.group(1).strip(): (int(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^(.+?)\s+(\d+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+$",
                                 result.stdout, re.M)}
    configurations = len(Settings(main_config(**SMOKE_MATRIX)).matrix())
    assert f"matrix: {configurations} configurations (1 models)" in result.stdout
    full, _ = rows["full plan"]
    # per configuration: convert, conversion_check, native, floor, model_repository,
    # accuracy, offline, online, plots, configuration_report; per model: weights, data, eval set,
    # perf data, and one export per format its configurations use
    assert full > 10 * configurations
    assert rows["nothing changed"][0] == 0
    # one configuration's offline.csv from nothing: its model's source and export, then
    # convert, conversion_check, model_repository, accuracy, offline
    one_jobs, one_s = rows["one configuration (results/tft-tiny/cpu/onnx_fp32/offline.csv)"]
    assert one_jobs == 10 and one_s > 0
    # a changed online sweep re-runs online, plots and the report of every configuration
    assert rows["tft-tiny: online concurrency list"][0] == 3 * configurations
    assert rows["tft-tiny: weights seed"][0] == full  # the only model: everything
    floor_jobs, floor_s = rows["Snakemake's floor (same shape, no functions)"]
    assert abs(floor_jobs - full) <= 0.05 * full and floor_s > 0
    assert re.search(r"^full plan / Snakemake's floor: [\d.]+$", result.stdout, re.M)
