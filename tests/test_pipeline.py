"""Real Snakemake runs of the tiny TFT configuration through the real Triton and
perf_analyzer, and the incremental behaviour of re-runs."""

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from conftest import (
    ONE_LEVEL,
    ROOT,
    TINY,
    check_littles_law,
    check_measurements,
    copy_build,
    planned_jobs,
    snakemake,
    tiny_models,
)
from deploybench.measurement import host_load
from deploybench.records import facts, formats
from deploybench.records.tables import NATIVE_COLUMNS, PROCESS_TELEMETRY, TAIL_COLUMNS
from deploybench.records.tables import PERF_COLUMNS as COLUMNS
from deploybench.reporting.served_native import served_vs_native, served_vs_native_table
from deploybench.triton.config import read as read_config

pytestmark = pytest.mark.e2e  # real Snakemake, Triton and perf_analyzer

RUN = "results/tft-tiny/cpu/onnx_fp32"


@pytest.fixture(scope="module")
def built(tiny_build, tmp_path_factory):
    """One full default build of the tiny configuration (onnx, fp32, cpu), this module's
    own copy: its tests build more in it."""
    return copy_build(tiny_build, tmp_path_factory.mktemp("pipeline") / "work")


def test_full_build_produces_every_artifact(built, settings):
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
    assert list(offline.columns) == COLUMNS + PROCESS_TELEMETRY  # the references' first
    assert list(offline["Batch"]) == [1, 4] and set(offline["Concurrency"]) == {1}
    online = pd.read_csv(run / "online.csv")
    assert list(online["Concurrency"]) == [1, 2] and set(online["Batch"]) == {1}
    check_measurements(run, settings.run("tft-tiny", "cpu", "onnx", "fp32")["model"])
    for scenario in ("accuracy", "offline", "online", "native"):  # each held the device
        lock = json.loads((run / f"{scenario}.json").read_text())["provenance"]["device_lock"]
        assert lock["device"] == "cpu" and lock["used_until"] > lock["acquired_at"]

    check_provenance(built, run)
    check_telemetry(run)


def test_each_level_records_its_host_load_and_where_it_ran(built):
    """A host load per level, none contended but as the threshold says, no request or
    settings change that was not the measurement's, and the step's own namespaces."""
    run = built / RUN
    for scenario in ("offline", "online"):  # a load per level
        table = pd.read_csv(run / f"{scenario}.csv")
        loads = json.loads((run / f"{scenario}.json").read_text())["host_load"]
        assert [(x["Batch"], x["Concurrency"]) for x in loads] == list(
            zip(table["Batch"], table["Concurrency"]))
        # contended: a busy host, or requests and settings changes not the measurement's
        assert all(x["other_cpu_cores"] >= 0 and x["host_cpus"] == os.cpu_count()
                   and x["foreign_requests"] == 0 and "server_settings_changed" not in x
                   and x["contended"] == host_load.contended_cpu(x["other_cpu_cores"],
                                                                 os.cpu_count())
                   for x in loads)
    assert "other_cpu_cores" in json.loads((run / "native.json").read_text())["host_load"]

    report = json.loads((run / "offline.json").read_text())
    assert report["perf_analyzer_settings"]["shared_memory"] == ["system"]
    assert report["perf_analyzer_settings"]["stability_percentage"] == 60
    assert report["perf_analyzer_settings"]["protocol"] == "http"  # as tft-tiny sets it
    assert report["provenance"]["triton"]["version"]
    isolation = report["provenance"]["isolation"]  # the step's own network and /dev/shm
    if os.getuid() == 0:  # as in CI: namespaces need CAP_SYS_ADMIN
        assert isolation["network"].startswith("a namespace of its own"), isolation
        assert isolation["shared_memory"].startswith("a /dev/shm of its own"), isolation
    assert (run / "logs/offline_server.log").read_text().strip()


def test_the_configuration_report_says_what_ran_and_how(built):
    """Its plots, tables, host load and telemetry sections, the perf_analyzer settings,
    and the warm-up the logs show at the levels the settings name."""
    run = built / RUN
    for png in ("offline_throughput", "offline_latency", "online_latency"):
        assert (run / f"plots/{png}.png").read_bytes()[:4] == b"\x89PNG"
    readme = (run / "README.md").read_text()
    assert "| Inferences/Second |" in readme.replace("Batch | Concurrency ", "")
    assert "seeded random initialisation (seed 0)" in readme
    assert "](plots/online_latency.png)" in readme
    assert "## Host load" in readme and "ran beside other load" in readme.replace(
        "No measurement ran", "ran")
    telemetry = readme.split("## Telemetry\n")[1].split("## Provenance")[0]
    assert readme.index("## Host load") < readme.index("## Telemetry")
    assert "| Scenario | Batch | Concurrency | Shared memory | process CPU mean (%) |" in telemetry
    assert telemetry.count("| native |") == 2 and "GPU" not in telemetry  # the cpu key
    assert readme.count("process CPU mean (%)") == 1  # measurement tables: references' columns
    for scenario, memory, levels in (  # tiny.yaml's windows, tft-tiny's warm-up levels
            ("offline", "system", "batch 1 x concurrency 1, batch max x concurrency 1"),
            ("online", "none", "batch max x concurrency max")):
        assert (f"| perf_analyzer {scenario} | HTTP, shared memory {memory}, 0.25 s windows, "
                f"warm-up of 3 windows of 0.5 s at {levels} |") in readme
    # each level warmed in turn, at the sweep's batch and concurrency it names, in the
    # windows twice as long (tft-tiny's warmup_windows) the report says
    warmed = [line for line in (built / RUN / "logs/offline_perf_analyzer.log").read_text()
              .splitlines() if line.startswith("[warm-up, discarded] $ ")]
    assert [re.search(r" -b (\d+) .*--concurrency-range (\S+) .* -p 500 ", w).groups()
            for w in warmed] == [("1", "1:1"), ("4", "1:1")], warmed
    warmed = [line for line in (built / RUN / "logs/online_perf_analyzer.log").read_text()
              .splitlines() if line.startswith("[warm-up, discarded] $ ")]
    assert [re.search(r"--concurrency-range (\S+) ", w).group(1) for w in warmed] == [
        "2:2"], warmed


def test_the_model_report_and_the_runs_last_lines(built):
    """The model report links the configuration and its frontier plots; the terminal
    shows each level as it is measured and the run ends naming its reports."""
    run = built / RUN
    model_readme = (built / "results/tft-tiny/README.md").read_text()
    assert "[onnx_fp32](cpu/onnx_fp32/README.md)" in model_readme
    for scenario in ("offline", "online"):  # throughput against latency, linked
        assert f"![{scenario} frontier](plots/{scenario}_frontier.png)" in model_readme
        png = built / f"results/tft-tiny/plots/{scenario}_frontier.png"
        assert png.read_bytes()[:4] == b"\x89PNG"
    assert (run / "benchmarks/offline.tsv").is_file()
    # a measuring step says on the terminal where it is, level by level
    terminal = (built / "terminal.txt").read_text()
    assert "offline (tft-tiny): 1/2 (batch 1, concurrency 1, system shared memory)" in terminal
    assert "online (tft-tiny): 2/2 (batch 1, concurrency 2, none shared memory)" in terminal
    # ... and the run ends naming the reports it built and the HTML report's command
    assert terminal.strip().splitlines()[-6:] == [
        "deploybench: 2 of 2 reports asked for are built",
        "  Model reports (every configuration compared):",
        "    results/tft-tiny/README.md",
        "  Configuration reports:",
        f"    {RUN}/README.md",
        "  The HTML report of what is built (plots, tables, provenance): snakemake --report "
        f"report.html --configfile {TINY}"], terminal[-2000:]


def check_telemetry(run: Path) -> None:
    """CPU and memory of the serving process tree (the server and its stub; the step for
    native) beside every measured row, after the references' columns, consistent with the
    JSON's per-row detail and plausible: each figure between what a process can use."""
    cpus, memory_mib = os.cpu_count(), psutil.virtual_memory().total / 2**20
    for scenario, columns, tail in (("offline", COLUMNS, []), ("online", COLUMNS, TAIL_COLUMNS),
                                  ("native", NATIVE_COLUMNS, [])):
        table = pd.read_csv(run / f"{scenario}.csv")
        # online: every request's tail after the telemetry
        assert list(table.columns) == columns + PROCESS_TELEMETRY + tail, table.columns
        report = json.loads((run / f"{scenario}.json").read_text())
        served_by = {scenario: report["provenance"].get("server", {}).get("served_by")}
        detail = report["telemetry"]
        assert [d["Batch"] for d in detail] == list(table["Batch"])
        for d, (_, row) in zip(detail, table.iterrows()):
            procs = d["processes"]
            assert d["device"] == "cpu" and "gpu" not in d
            assert row["process CPU mean (%)"] == procs["cpu_percent"]["mean"]
            assert row["process RSS max (MiB)"] == procs["rss_mib"]["max"]
            # a running tritonserver and its python stub (ONNX Runtime loaded), or this
            # step with torch: tens of MiB at least, and below the host's memory
            assert 30 < row["process RSS mean (MiB)"] <= row["process RSS max (MiB)"] \
                < memory_mib, row
            assert 0 < row["process CPU mean (%)"] <= row["process CPU max (%)"] \
                <= 100 * cpus, row
            # samples over the whole measurement; served: the server, and the stub of a
            # python-backend model (the C++ backend runs it in the server's process)
            assert procs["windows"] >= 1 and d["duration_s"] > 0
            assert procs["count_max"] >= (1 if scenario == "native" or served_by[scenario]
                                          == "deploybench" else 2), procs
        if scenario == "native":  # the runner computed in this process all the time
            assert (table["process CPU mean (%)"] > 20).all(), table
    accuracy = json.loads((run / "accuracy.json").read_text())["telemetry"]
    assert accuracy["processes"]["count_max"] >= 1 and accuracy["processes"]["rss_mib"][
        "max"] > 30


def check_provenance(work: Path, run: Path) -> None:
    """What each measurement ran on: the CPU by model, the project's commit, the package
    list kept once under its hash; served and native on one device."""
    prov = {s: json.loads((run / f"{s}.json").read_text())["provenance"]
            for s in ("offline", "native")}
    cpu = next(line.split(":", 1)[1].strip() for line in
               Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    for p in prov.values():
        assert p["cpu"] == cpu and p["cpus"] == os.cpu_count() and p["device"] == "cpu"
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        assert p["project"]["commit"] == commit
        packages = work / "results/packages" / f"{p['installed_packages']}.txt"
        text = packages.read_text()
        assert hashlib.sha256(text.encode()).hexdigest()[:16] == p["installed_packages"]
        assert f"snakemake=={importlib.metadata.version('snakemake')}" in text.splitlines()
    assert len(list((work / "results/packages").iterdir())) == 1  # one list for the run
    assert facts.same_device(prov["offline"], prov["native"]) is None


def test_served_over_native_is_refused_across_devices(built, tmp_path):
    """A native table measured on another machine is not divided into the served one."""
    for name in ("offline.csv", "offline.json", "native.csv", "native.json"):
        (tmp_path / name).write_bytes((built / RUN / name).read_bytes())
    ratio = served_vs_native(tmp_path / "offline.csv", tmp_path / "native.csv")
    assert len(ratio) == 2 and (ratio["served/native"] > 0).all()
    native = json.loads((tmp_path / "native.json").read_text())
    native["provenance"]["host"] = "another-node"
    (tmp_path / "native.json").write_text(formats.text(native))
    with pytest.raises(facts.DifferentDevices, match="host .* against 'another-node'"):
        served_vs_native(tmp_path / "offline.csv", tmp_path / "native.csv")
    assert "served/native not computed" in served_vs_native_table(
        tmp_path / "offline.csv", tmp_path / "native.csv")


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


def test_every_online_request_gives_the_levels_tail(built):
    """Each online level's percentiles from perf_analyzer's export: the requests of the
    windows it kept (at least perf.min_requests), its p50 as perf_analyzer's, rising with
    the percentile, each inside its interval, beside the row in online.csv; the batches
    Triton formed (one request in flight forms batch 1 only; two, at most 2), at least one
    sample executed for each kept request; the report tabulates and plots them."""
    online = pd.read_csv(built / RUN / "online.csv")
    report = json.loads((built / RUN / "online.json").read_text())
    tails = {t["Concurrency"]: t for t in report["tail"]}
    formed = {f["Concurrency"]: {int(b): n for b, n in f["executions_by_batch"].items()}
              for f in report["batches_formed"]}
    assert sorted(tails) == sorted(formed) == sorted(online["Concurrency"])
    assert report["perf_analyzer_settings"]["measurement_request_count"] == 15  # 45 / 3
    for _, row in online.iterrows():
        level = tails[row["Concurrency"]]
        assert level["requests"] >= 45  # perf.min_requests (tiny.yaml)
        assert row["Requests"] == level["requests"]
        found = level["percentiles_ms"]
        values = [found[q]["value"] for q in ("p50", "p90", "p95", "p99", "p99.9")]
        assert values == sorted(values)
        assert row["p99 every request (ms)"] == found["p99"]["value"]
        # p99's upper end where 368 requests or more bound it (0.99^368 < 0.025), else none
        low, high = found["p99"]["ci95"]
        assert (high is None) == (level["requests"] < 368) == pd.isna(row["p99 ci95 high (ms)"])
        assert row["p99 ci95 low (ms)"] == low <= found["p99"]["value"]
        assert high is None or found["p99"]["value"] <= high == row["p99 ci95 high (ms)"]
        assert all(q["ci95"][0] <= q["value"] and (q["ci95"][1] is None or
                                                   q["value"] <= q["ci95"][1])
                   for q in found.values())
        assert abs(found["p50"]["value"] - row["p50 latency (ms)"]) <= \
            0.1 * row["p50 latency (ms)"] + 0.05, (level, row)
        batches = formed[row["Concurrency"]]
        assert max(batches) <= row["Concurrency"], batches  # batch 1 requests
        assert sum(b * n for b, n in batches.items()) >= level["requests"], batches
    readme = (built / RUN / "README.md").read_text()
    assert "Every request's latency of the windows perf_analyzer kept" in readme
    assert "Executions by the batch size Triton's dynamic batcher formed" in readme
    assert "](plots/online_tail.png)" in readme
    assert (built / RUN / "plots/online_tail.png").read_bytes().startswith(b"\x89PNG")


def test_an_unstable_level_is_recorded_and_the_run_goes_on(built, tmp_path):
    """No three windows agree within 0.001 %: every level is measured once more and kept,
    flagged with its windows' spread (where it used to end the run), the reports mark
    it, and the run builds its two configurations one after the other: the first one's
    measurements all before the second one's. perf.min_duration_s lengthens the windows of
    online levels that span less."""
    work = tmp_path / "work"
    shutil.copytree(built, work, symlinks=True)
    second = "results/tft-tiny/cpu/ts-trace_fp32"
    strict = {"stability_percentage": 0.001, "max_trials": 3, "attempts": 1}
    extra = tmp_path / "unstable.yaml"
    extra.write_text(yaml.safe_dump({
        "targets": [dict(zip(("model", "gpu", "backend", "precision"),
                             ["tft-tiny", "cpu", *Path(r).name.split("_")]))
                    for r in (RUN, second)],
        "perf": {**strict, "on_unstable": "record", "min_duration_s": 1.0},
        "perf_overrides": {"cpu": strict},
        "model_overrides": ONE_LEVEL}))  # each level here is measured twice over
    started = time.time()  # the copy holds earlier tests' measurements too
    snakemake(work, "--configfile", str(TINY), str(extra))
    locks, lengthened = {}, []
    for run in (RUN, second):
        for scenario in ("offline", "online"):
            table = pd.read_csv(work / run / f"{scenario}.csv")
            assert not table["Stable"].any(), table
            # three windows never agree within 0.001 %: the kept ones spread wider
            assert (table["window spread (%)"] > 0.001).all(), table
            check_littles_law(table, f"{run} {scenario}")
            assert "recorded as unstable" in (work / run / f"logs/{scenario}.log").read_text()
        # every level's kept windows span a second at least: tft-tiny's levels of three
        # quarter-second windows, shorter at first, measured again with longer windows
        tails = json.loads((work / run / "online.json").read_text())["tail"]
        assert all(t["seconds"] >= 1.0 for t in tails), tails
        lengthened += [t.get("windows_lengthened", 1) > 1 for t in tails]
        readme = (work / run / "README.md").read_text()
        offline = pd.read_csv(work / run / "offline.csv")
        assert f"**{len(offline)} of {len(offline)} levels did not stabilise**" in readme
        locks[run] = [lock for lock in (
            json.loads(p.read_text()).get("provenance", {}).get("device_lock")
            for p in (work / run).glob("*.json")) if lock and lock["acquired_at"] > started]
        assert len(locks[run]) >= 3, run  # offline, online, floor at least
    assert max(lock["used_until"] for lock in locks[RUN]) <= \
        min(lock["acquired_at"] for lock in locks[second])
    assert any(lengthened), lengthened


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
