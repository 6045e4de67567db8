"""What a second run of the tiny build re-runs, refuses and keeps: nothing to do, only
what a change reaches, early errors naming the valid keys, one measurement at a time."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from testkit.pipeline import RUN
from testkit.workflow import ROOT, TINY, planned_jobs, snakemake, tiny_models


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
    # the online plot is a rule of its own (online_plot): the offline plots stay
    assert jobs == {"online": 1, "online_plot": 1, "configuration_report": 1,
                    "configuration_html": 1,
                    "model_report": 1, "model_html": 1, "configuration_comparison": 1,
                    "configuration_comparison_html": 1, "model_comparison": 1,
                    "model_comparison_html": 1, "ship": 1, "ship_html": 1, "all": 1}, jobs
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
    assert "unknown GPU key 'a31'; valid GPU keys: a100, a30, a40, cpu, h100, h200, t4, v100" in (
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


def test_a_config_error_fails_the_run_though_every_result_exists(built, tmp_path):
    assert "Nothing to be done" in snakemake(built, "-n").stdout
    too_big = tiny_models(tmp_path, device_overrides={"cpu": {"offline": {
        "batch_sizes": [1, 4, 16]}}})
    result = snakemake(built, "-n", "--config", too_big, check=False)
    assert result.returncode != 0
    assert ("model 'tft-tiny' on GPU key 'cpu': offline.batch_sizes [16] exceed "
            "triton.max_batch_size 8") in result.stdout + result.stderr


def test_numbers_given_with_config_are_numbers(built):
    """Snakemake hands --config values over as strings; the schema's types win."""
    result = snakemake(built, "-n", "--config", "perf={attempts: 5, stability_percentage: 45}",
                       "allow_gpu_mismatch=false")
    assert "Nothing to be done" not in result.stdout  # the offline/online settings changed
    jobs = planned_jobs(result)
    assert jobs["offline"] == jobs["online"] == 1 and "accuracy" not in jobs, jobs
    result = snakemake(built, "-n", "--config", "perf={attempts: many}", check=False)
    assert "invalid value at 'perf/attempts': 'many' is not of type 'integer'" in (
        result.stdout + result.stderr)


def test_two_invocations_in_one_folder_measure_one_at_a_time(built, tmp_path):
    """Two snakemake processes started together, each with a measurement on the same
    device: the device lock makes the second wait for the first, and each result says
    when it held the device."""
    from deploybench.measurement.locks import device_lock

    other = "results/tft-tiny/cpu/ts-trace_fp32"
    snakemake(built, f"{other}/accuracy.csv")
    targets = [f"{RUN}/offline.csv", f"{other}/offline.csv"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with device_lock("cpu"):  # both invocations start while the device is busy
        runs = [subprocess.Popen([sys.executable, "-m", "snakemake", "--snakefile",
                                  str(ROOT / "Snakefile"), "--directory", str(built),
                                  "--configfile", str(TINY), "-c2", target,
                                  "--forcerun", "offline", "--resources", "bench_slot=1"],
                                 cwd=built, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
                for target in targets]
        time.sleep(8)
        waiting = [r.poll() is None for r in runs]  # both wait for the device
        assert all(waiting), [r.communicate()[0][-3000:] for r in runs]
    outputs = [r.communicate(timeout=600)[0] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [o[-3000:] for o in outputs]
    locks = sorted((json.loads((built / t.replace(".csv", ".json")).read_text())
                    ["provenance"]["device_lock"] for t in targets),
                   key=lambda lock: lock["acquired_at"])
    assert all(lock["waited_s"] > 0 for lock in locks), locks
    assert locks[0]["used_until"] <= locks[1]["acquired_at"], locks  # one at a time


def test_failed_step_keeps_the_earlier_good_result(built, tmp_path):
    """With perf.on_unstable: fail, a failing re-run (unreachable stability) leaves no
    partial CSV, and the earlier good measurement survives in history/ (Snakemake deletes
    a re-run job's outputs)."""
    good = (built / RUN / "offline.csv").read_text()
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump({"perf": {
        "stability_percentage": 0.001, "max_trials": 1, "attempts": 1, "on_unstable": "fail",
        "measurement_mode": "count_windows", "measurement_interval_ms": 500}}))
    result = snakemake(built, f"{RUN}/offline.csv", "--configfile", str(TINY), str(strict),
                       check=False)
    assert result.returncode != 0
    assert "no stable offline measurement" in (built / RUN / "logs/offline.log").read_text()
    assert not (built / RUN / "offline.csv").exists()
    assert not list((built / RUN).glob(".offline*.tmp-*"))
    assert not (built / RUN / ".offline-work").exists()  # perf_analyzer's CSVs are gone
    kept = [p.read_text() for p in (built / RUN / "history").glob("offline-*.csv")]
    assert good in kept
