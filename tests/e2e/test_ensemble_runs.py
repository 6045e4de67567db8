"""An ensemble under the real Snakemake: online not planned, tables past the cache served."""

import re
import subprocess
import sys

import yaml

from testkit.workflow import ROOT, snakemake


# the real Snakemake, a dry run
def test_online_is_not_planned_for_an_ensemble(tmp_path):
    """A dry run of default targets with an hps-* configuration beside a single model:
    only the single model is measured online and has an online plot; asking for the
    ensemble's online.csv is refused with the reason while the DAG is built."""
    targets = tmp_path / "targets.yaml"
    targets.write_text(yaml.safe_dump({"targets": [
        {"model": "dlrm-tiny", "gpu": "cpu", "backend": b, "precision": "fp32"}
        for b in ("onnx", "hps-onnx")]}))
    from testkit.workflow import TINY, planned_jobs

    result = snakemake(tmp_path, "-n", "--configfile", str(TINY), str(targets))
    jobs = planned_jobs(result)
    assert jobs["offline"] == jobs["configuration_report"] == 2, jobs
    assert jobs["online"] == jobs["online_plot"] == 1, jobs
    assert "output: results/dlrm-tiny/cpu/onnx_fp32/online.csv" in result.stdout
    assert "hps-onnx_fp32/online" not in result.stdout
    assert "hps-onnx_fp32/plots/online_latency.png" not in result.stdout

    refused = snakemake(tmp_path, "-n", "results/dlrm-tiny/cpu/hps-onnx_fp32/online.csv",
                        check=False)
    assert refused.returncode != 0
    assert ("no online scenario for backend 'hps-onnx' (Ensemble: hierarchical embeddings + "
            "ONNX Runtime) of model 'dlrm-tiny': the ensemble takes one request per batch") \
        in refused.stdout + refused.stderr


def test_the_table_size_sweep_serves_tables_past_the_cache(tmp_path):
    """scripts/benchmarks/bench_ensemble.py's sweep on a real Triton (it checks every size's lookups
    against the table and exits otherwise): tables the size of the cache all hit it, tables
    four times its size hit it in proportion to the skewed ids, well below 1."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/benchmarks/bench_ensemble.py"), "--parts", "sweep",
         "--sweep-rows", "2048", "8192", "--cache-mb", "1", "--sweep-batch", "64",
         "--sweep-requests", "5", "--workdir", str(tmp_path)],
        capture_output=True, text=True, check=True).stdout
    rows = re.findall(r"^\| ([\d,]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", out, re.M)
    assert len(rows) == 2, out
    (_, _, fits, fraction1, hits1), (_, _, past, fraction4, hits4) = rows
    assert float(fits) <= 1.0 and float(fraction1) == 1.0 and float(hits1) == 1.0
    assert 3.9 < float(past) < 4.1 and abs(float(fraction4) - 0.25) < 0.01
    assert 0.25 <= float(hits4) < 0.9  # the most frequent rows are cached: above the fraction
