"""Real Snakemake runs of the tiny TFT configuration through the real Triton and
perf_analyzer, and the incremental behaviour of re-runs."""

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from deploybench.measurement import host_load
from deploybench.records import facts, formats
from deploybench.records.tables import NATIVE_COLUMNS, PROCESS_TELEMETRY, TAIL_COLUMNS
from deploybench.records.tables import PERF_COLUMNS as COLUMNS
from deploybench.reporting.served_native import served_vs_native, served_vs_native_table
from deploybench.triton.config import read as read_config
from testkit.measured import check_littles_law, check_measurements
from testkit.pipeline import RUN
from testkit.workflow import ONE_LEVEL, ROOT, TINY, snakemake


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
