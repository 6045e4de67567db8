"""Real Snakemake runs of the tiny TFT configuration through the real Triton and
perf_analyzer, and the incremental behaviour of re-runs."""

import json
import os

import pandas as pd
import pytest
import yaml

from conftest import ROOT, TINY, planned_jobs, snakemake
from deploybench.tables import PERF_COLUMNS as COLUMNS
from deploybench.triton.config import read as read_config

pytestmark = pytest.mark.e2e  # real Snakemake, Triton and perf_analyzer

RUN = "results/tft-tiny/cpu/onnx_fp32"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One full default build of the tiny configuration (onnx, fp32, cpu)."""
    work = tmp_path_factory.mktemp("pipeline")
    snakemake(work)
    return work


def test_full_build_produces_every_artifact(built):
    run = built / RUN
    check = pd.read_csv(run / "conversion_check.csv")
    assert check["passed"].all() and check["max_abs_error"].max() < 1e-4

    config = read_config(run / "model_repository/tft-tiny/config.pbtxt")
    assert config.max_batch_size == 8 and config.instance_group[0].count == 1
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 100

    accuracy = pd.read_csv(run / "accuracy.csv")
    metrics = accuracy[accuracy["kind"] == "metric"]
    assert set(metrics["name"]) == {"p10_risk", "p50_risk", "p90_risk"}
    assert (metrics["triton"] - metrics["source"]).abs().max() < 1e-4
    assert accuracy[accuracy["kind"] == "deviation"]["passed"].all()

    offline = pd.read_csv(run / "offline.csv")
    assert list(offline.columns) == COLUMNS
    assert list(offline["Batch"]) == [1, 4] and set(offline["Concurrency"]) == {1}
    online = pd.read_csv(run / "online.csv")
    assert list(online["Concurrency"]) == [1, 2] and set(online["Batch"]) == {1}
    for table in (offline, online):
        assert (table["Inferences/Second"] > 0).all()
        assert (table["avg latency (ms)"] > 0).all()

    report = json.loads((run / "offline.json").read_text())
    assert report["perf_analyzer_settings"]["shared_memory"] == "system"
    assert report["perf_analyzer_settings"]["stability_percentage"] == 60
    assert report["provenance"]["triton"]["version"]
    assert (run / "logs/offline_server.log").read_text().strip()

    for png in ("offline_throughput", "offline_latency", "online_latency"):
        assert (run / f"plots/{png}.png").read_bytes()[:4] == b"\x89PNG"
    readme = (run / "README.md").read_text()
    assert "| Inferences/Second |" in readme.replace("Batch | Concurrency ", "")
    assert "seeded random initialisation (seed 0)" in readme
    assert "](plots/online_latency.png)" in readme
    assert "[onnx_fp32](cpu/onnx_fp32/README.md)" in (
        built / "results/tft-tiny/README.md").read_text()
    assert (run / "benchmarks/offline.tsv").is_file()


def test_second_run_has_nothing_to_do(built):
    assert "Nothing to be done" in snakemake(built, "-n").stdout


def test_model_report_waits_for_the_configurations_asked_for_with_it(built):
    """A model report asked for beside a new configuration's report is built after it,
    so that it lists it."""
    result = snakemake(built, "-n", "results/tft-tiny/cpu/ts-script_fp32/README.md",
                       "results/tft-tiny/README.md")
    job = result.stdout.split("rule model_report:")[1].split("\n\n")[0]
    assert "results/tft-tiny/cpu/ts-script_fp32/README.md" in job.split("output:")[0], job
    assert "results/tft-tiny/cpu/onnx_fp32/README.md" in job  # the default target too


def test_online_concurrency_change_reruns_only_online_and_dependants(built, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    model["online"]["concurrency"] = [1, 2, 3]
    (models / "tft-tiny.yaml").write_text(yaml.safe_dump(model))
    jobs = planned_jobs(snakemake(built, "-n", "--config", f"models_dir={models}"))
    assert jobs == {"online": 1, "plots": 1, "configuration_report": 1,
                    "model_report": 1, "all": 1}, jobs
    result = snakemake(built, "-n", "--config", f"models_dir={models}")
    assert f"output: {RUN}/online.csv" in result.stdout
    assert f"output: {RUN}/offline.csv" not in result.stdout


def test_model_code_change_reruns_from_export(built):
    # Snakemake compares checksums, not only times: the code must really change.
    source = ROOT / "scripts/deploybench/models/tft/net.py"
    original, stat = source.read_bytes(), source.stat()
    try:
        source.write_bytes(original + b"\n# a code change\n")
        jobs = planned_jobs(snakemake(built, "-n"))
    finally:
        source.write_bytes(original)
        os.utime(source, (stat.st_atime, stat.st_mtime))
    for rule in ("weights", "generate_data", "eval_set", "export", "convert",
                 "conversion_check", "accuracy", "offline", "online", "configuration_report"):
        assert rule in jobs, (rule, jobs)


def test_unknown_keys_fail_early_with_the_valid_ones(built):
    result = snakemake(built, "-n", "results/tft-tiny/a31/onnx_fp32/offline.csv", check=False)
    assert result.returncode != 0
    assert "unknown GPU key 'a31'; valid GPU keys: a100, a30, a40, cpu, h100, t4, v100" in (
        result.stdout + result.stderr)
    result = snakemake(built, "-n", "results/tft-tiny/cpu/trt_fp16/offline.csv", check=False)
    assert "precision 'fp16' cannot run on GPU key 'cpu'" in result.stdout + result.stderr


def test_gpu_targets_dry_run_but_are_refused_on_this_machine(built):
    target = "results/tft-tiny/a30/trt_fp16/offline.csv"
    assert planned_jobs(snakemake(built, "-n", target))["offline"] == 1
    run = built / "results/tft-tiny/a30/ts-trace_fp32"
    result = snakemake(built, str(run.relative_to(built) / "accuracy.csv"), check=False)
    assert result.returncode != 0
    log = (run / "logs/conversion_check.log").read_text()  # the first step on the device
    assert "GPU key 'a30' needs a device whose name contains 'A30'" in log
    assert not (run / "conversion_check.csv").exists()


def test_failed_step_keeps_the_earlier_good_result(built, tmp_path):
    """A failing re-run (unreachable stability) leaves no partial CSV, and the earlier
    good measurement survives in history/ (Snakemake deletes a re-run job's outputs)."""
    good = (built / RUN / "offline.csv").read_text()
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump({"perf": {
        "stability_percentage": 0.001, "max_trials": 1, "attempts": 1,
        "measurement_mode": "count_windows", "measurement_interval_ms": 500}}))
    result = snakemake(built, f"{RUN}/offline.csv", "--configfile", str(TINY), str(strict),
                       check=False)
    assert result.returncode != 0
    assert "no stable offline measurement" in (built / RUN / "logs/offline.log").read_text()
    assert not (built / RUN / "offline.csv").exists()
    assert not list((built / RUN).glob(".offline*.tmp-*"))
    kept = [p.read_text() for p in (built / RUN / "history").glob("offline-*.csv")]
    assert good in kept
