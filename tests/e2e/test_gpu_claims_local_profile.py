"""The local profile's GPU claims under the real Snakemake: one measuring job a GPU, each
with its cores."""

import subprocess
import sys

from testkit.gpu_claims import host  # noqa: F401 (a fixture)
from testkit.workflow import ROOT


# the real Snakemake plans it
def test_the_local_profile_runs_one_measuring_job_a_gpu_each_with_its_cores(host, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    target = "results/tft-tiny/h100/onnx_fp32/offline.csv"
    plan = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--directory", str(work), "--workflow-profile", str(ROOT / "profiles/default"),
         "-n", "--cores", "6", target, "results/tft-tiny/cpu/onnx_fp32/offline.csv",
         "--configfile", str(ROOT / "tests/config/tiny.yaml")],
        env=host, capture_output=True, text=True, cwd=work)
    assert plan.returncode == 0, plan.stderr[-3000:]
    offline = plan.stdout.split("rule offline:")[1:]
    threads = sorted(int(b.split("threads: ")[1].split()[0]) for b in offline)
    assert threads == [2, 6], plan.stdout[-3000:]  # h100: 6 cores / 3 GPUs; cpu: all 6
    assert "bench_slot=1" in offline[0]
    # a setting says otherwise; a bad one is refused by name
    two = subprocess.run(
        [sys.executable, "-c", "from deploybench.measurement import device; "
         "print(device.bench_slots())"], env={**host, "DEPLOYBENCH_BENCH_SLOTS": "2"},
        capture_output=True, text=True)
    assert two.stdout.strip() == "2"
    bad = subprocess.run(
        [sys.executable, "-c", "from deploybench.measurement import device; "
         "device.bench_slots()"], env={**host, "DEPLOYBENCH_BENCH_SLOTS": "zero"},
        capture_output=True, text=True)
    assert bad.returncode != 0 and "DEPLOYBENCH_BENCH_SLOTS='zero'" in bad.stderr
