"""What the reports of real Snakemake runs of the tiny TFT configuration say: repeats and
their spread, regression reports against an earlier run, a baseline folder or a software
change, and the HTML report of a whole or partly built workflow."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from deploybench.measurement import provenance
from deploybench.records import formats, layout
from testkit.pipeline import RUN
from testkit.workflow import ONE_LEVEL, ROOT, TINY, planned_jobs, snakemake


def test_repeats_keep_the_median_run_and_say_how_far_runs_spread(built, tmp_path):
    """perf.repeats: 3 fresh perf_analyzer runs a level; the table keeps the median one."""
    work = tmp_path / "work"
    shutil.copytree(built, work, symlinks=True)
    extra = tmp_path / "repeats.yaml"
    extra.write_text(yaml.safe_dump({"perf_overrides": {"cpu": {"repeats": 3}},
                                     "model_overrides": ONE_LEVEL}))
    # both config files in one option (a second --configfile would replace the first)
    snakemake(work, f"{RUN}/offline.csv", f"{RUN}/README.md", "--configfile", str(TINY),
              str(extra))
    offline = pd.read_csv(work / RUN / "offline.csv")
    noise = json.loads((work / RUN / "offline.json").read_text())["repeats"]
    assert [(n["Batch"], n["Concurrency"]) for n in noise] == list(
        zip(offline["Batch"], offline["Concurrency"]))
    for level, kept in zip(noise, offline["Inferences/Second"]):
        runs = level["runs"]
        assert len(runs) == 3 and level["median"] == sorted(runs)[1]
        assert abs(kept - level["median"]) < 0.01  # the median run is the table's row
        assert min(runs) <= level["ci95"][0] <= level["median"] <= level["ci95"][1] <= max(runs)
        span = (max(runs) - min(runs)) / level["median"] * 100
        assert abs(level["range_pct"] - span) < 0.01 and level["noisy"] == (span > 60)
    readme = (work / RUN / "README.md").read_text()
    assert "## Noise" in readme and "3 runs a level" in readme
    assert "looser than perf_analyzer's and the references' 10 %" in readme


def markdown_rows(text: str, heading: str) -> list[dict]:
    """The rows of the first table under `heading` in a Markdown report."""
    section = text.split(f"\n{heading}\n", 1)[1]
    lines = [line for line in section.split("\n## ", 1)[0].splitlines()
             if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[2:]] if cells else []


def test_an_unchanged_rerun_reports_no_change_beyond_the_noise(built, tmp_path):
    """The offline measurement re-run with nothing changed: compare.md (baseline: the
    previous measurement) finds no level faster or slower than the two runs' noise, and the
    same code; a history stamp given on the command line picks the same baseline."""
    work = tmp_path / "work"
    shutil.copytree(built, work, symlinks=True)
    snakemake(work, f"{RUN}/compare.md", "results/tft-tiny/compare.md", "--forcerun", "offline")
    report = (work / RUN / "compare.md").read_text()
    stamps = list(layout.history_copies(work / RUN / "offline.json"))
    summary = {row["scenario"]: row for row in markdown_rows(report, "## Summary")}
    assert summary["offline"]["current"] == f"history/offline-{stamps[-1]}", summary
    assert summary["offline"]["baseline"] == f"history/offline-{stamps[-2]}", summary
    levels = markdown_rows(report, "## Offline")
    assert [row["verdict"] for row in levels] == ["unchanged", "unchanged"], report
    assert "**No change beyond the measured noise** in 2 compared levels." in report
    for scenario in ("online", "native"):  # measured once so far
        assert summary[scenario]["baseline"] == "none", summary
    assert "No baseline yet: no measurement before the current one" in report
    assert "project.commit" not in report
    assert markdown_rows(report, "## Settings differences") == []
    model = markdown_rows((work / "results/tft-tiny/compare.md").read_text(),
                          "## Configurations")
    assert model == [{"configuration": "[cpu/onnx_fp32](cpu/onnx_fp32/compare.md)",
                      "compared": "offline", "faster": "0", "slower": "0", "mixed": "0",
                      "unchanged": "2", "added": "0", "removed": "0",
                      "contended": model[0]["contended"],
                      "provenance differences": model[0]["provenance differences"]}], model

    snakemake(work, f"{RUN}/compare.md", "--config", f"compare={{baseline: {stamps[-2]}}}")
    report = (work / RUN / "compare.md").read_text()
    assert f"against the baseline `{stamps[-2]}` (history stamp" in report
    summary = {row["scenario"]: row for row in markdown_rows(report, "## Summary")}
    assert summary["offline"]["baseline"] == f"history/offline-{stamps[-2]}", summary


def test_a_bad_baseline_is_refused_early_with_what_is_valid(built):
    result = snakemake(built, "-n", "--config", "compare={baseline: last-tuesday}", check=False)
    assert result.returncode != 0
    assert ("compare.baseline 'last-tuesday' is not a baseline; valid: 'previous', a history "
            "stamp (YYYYMMDDTHHMMSSZ") in result.stdout + result.stderr


def test_a_baseline_folder_is_compared_level_by_level(built, tmp_path):
    """A measurement set in a folder of its own (as committed GPU results are), given on
    the command line: a modified copy of the built run. A level only the current run has is
    added, one only the set has removed; against ten times its throughput the current run
    is slower beyond the noise, except where the set's repeats have an interval as wide;
    replacing a file of the set re-runs the report."""
    work = tmp_path / "work"
    shutil.copytree(built, work, symlinks=True)
    committed = tmp_path / "set" / "onnx_fp32"  # the set's folder of this configuration
    committed.mkdir(parents=True)
    for name in ("offline", "online", "native"):
        for suffix in (".csv", ".json"):
            shutil.copy2(work / RUN / f"{name}{suffix}", committed / f"{name}{suffix}")
    offline = pd.read_csv(committed / "offline.csv")
    four = offline[offline["Batch"] == 4].assign(**{
        "Inferences/Second": offline["Inferences/Second"] * 10})
    pd.concat([four, four.assign(Batch=8)]).to_csv(committed / "offline.csv", index=False)
    online = pd.read_csv(committed / "online.csv")
    online["Inferences/Second"] *= 10
    online.to_csv(committed / "online.csv", index=False)
    report = json.loads((committed / "online.json").read_text())
    wide = online[online["Concurrency"] == 2].iloc[0]
    report["repeats"] = [{"Batch": 1, "Concurrency": 2, "Shared memory": "none",
                          "ci95": [wide["Inferences/Second"] * 0.05,
                                   wide["Inferences/Second"] * 1.1]}]
    (committed / "online.json").write_text(formats.text(report))
    setting = f"compare={{baseline: {committed.parent}}}"
    snakemake(work, f"{RUN}/compare.md", "--config", setting)

    text = (work / RUN / "compare.md").read_text()
    verdicts = {scenario: [(row.get("Concurrency"), row["Batch"], row["verdict"])
                           for row in markdown_rows(text, f"## {scenario.capitalize()}")]
                for scenario in ("offline", "online", "native")}
    assert verdicts == {"offline": [("1", "1", "added"), ("1", "4", "**slower**"),
                                    ("1", "8", "removed")],
                        "online": [("1", "1", "**slower**"), ("2", "1", "unchanged")],
                        "native": [(None, "1", "unchanged"), (None, "4", "unchanged")]}, text
    rows = markdown_rows(text, "## Online")
    assert rows[1]["noise ± % (baseline, current)"] == "95, 60", rows  # the interval's
    summary = {row["scenario"]: row["baseline"] for row in markdown_rows(text, "## Summary")}
    assert set(summary.values()) == {str(committed)}, summary
    assert "project.commit" not in text  # the same run's provenance

    time.sleep(1.1)
    online.assign(**{"Inferences/Second": online["Inferences/Second"] * 2}).to_csv(
        committed / "online.csv", index=False)
    assert planned_jobs(snakemake(work, "-n", f"{RUN}/compare.md", "--config", setting)) == {
        "configuration_comparison": 1}


def project_copy(dest: Path) -> Path:
    """The repository's workflow, package and configs (working tree) as a git repository
    of its own, committed: a run from it records that commit."""
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "Snakefile",
         "rules", "scripts", "triton_backend", "config", "tests/config", "envs", "profiles",
         "report"],
        capture_output=True, text=True, check=True).stdout.splitlines()
    for name in files:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    commit(dest, "the project as tested", init=True)
    return dest


def commit(project: Path, message: str, init: bool = False) -> str:
    git = ["git", "-C", str(project)]
    if init:
        subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "user.name=test", "-c", "user.email=test@localhost", "commit",
                    "-qm", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_software_change_is_reported_with_its_provenance(built, tmp_path):
    """A commit that makes the C++ backend's ONNX Runtime engine (which serves the run)
    wait 20 ms before each inference (as a slow pre-processing step would): the backend is
    built again, the model repository and what was measured on it re-run, and compare.md
    reports every offline and online level slower beyond the noise, with the project's
    commit among what differs."""
    work = tmp_path / "work"
    shutil.copytree(built, work, symlinks=True)
    project = project_copy(tmp_path / "project")
    engine = project / "triton_backend/onnxruntime_engine.cc"
    code = engine.read_text()
    code = code.replace("#include <string>\n", "#include <string>\n#include <thread>\n", 1)
    run_call = "  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {\n"
    assert run_call in code
    code = code.replace(run_call, run_call + "    std::this_thread::sleep_for("
                        "std::chrono::milliseconds(20));\n", 1)
    engine.write_text(code.replace("#include <algorithm>\n",
                                   "#include <algorithm>\n#include <chrono>\n", 1))
    changed = commit(project, "the engine waits 20 ms before each inference")
    snakemake(work, f"{RUN}/compare.md", "results/tft-tiny/compare.md", project=project)

    report = (work / RUN / "compare.md").read_text()
    summary = {row["scenario"]: row for row in markdown_rows(report, "## Summary")}
    for scenario, levels in (("offline", 2), ("online", 2)):
        assert summary[scenario]["slower"] == str(levels), summary
        rows = markdown_rows(report, f"## {scenario.capitalize()}")
        assert [row["verdict"] for row in rows] == ["**slower**"] * levels, report
        assert all(float(row["inf/s change"].rstrip(" %")) < -75 for row in rows), rows
    assert summary["native"]["baseline"] == "none"  # the engine is not native's input
    assert "**4 slower** of 4 compared levels, beyond the measured noise." in report
    before = json.loads((built / RUN / "offline.json").read_text())["provenance"]["project"]
    differences = {row["what"]: row for row in markdown_rows(report, "## Provenance differences")}
    assert differences["project.commit"] == {"what": "project.commit",
                                             "baseline": before["commit"], "current": changed,
                                             "scenarios": "offline, online"}, differences
    # the code's digest: the changed commit's, which it names
    code = differences["project.code"]["current"]
    assert code == provenance.code_digest(project, changed) != before["code"], differences
    assert provenance.commits_with_code(code, project) == [changed]
    model = markdown_rows((work / "results/tft-tiny/compare.md").read_text(),
                          "## Configurations")
    assert (model[0]["compared"], model[0]["slower"]) == ("offline, online", "4"), model
    assert "project.commit" in model[0]["provenance differences"], model


def test_a_configuration_put_together_from_runs_reports_what_its_folder_holds(tiny_build,
                                                                            tmp_path):
    """scripts/results_tools/assemble_configuration.py: the offline half of a configuration
    measured on one machine, its online half on another (gpu_lanes.sh's split runs). With the
    offline run's files alone the page shows them and says the rest is not in the folder; with
    every run's files it is the page the pipeline's own rule built."""
    built = tiny_build / RUN
    folder = tmp_path / RUN
    folder.mkdir(parents=True)
    for name in ("conversion_check.csv", "accuracy.csv", "offline.csv", "offline.json",
                 "native.csv", "native.json"):
        shutil.copy(built / name, folder / name)

    def assemble(*extra):
        return subprocess.run(
            [sys.executable, str(ROOT / "scripts/results_tools/assemble_configuration.py"), RUN,
             "--configfile", str(TINY), *extra], cwd=tmp_path, capture_output=True, text=True)

    result = assemble()
    assert result.returncode == 0, result.stderr
    half = (folder / "README.md").read_text()
    whole = (built / "README.md").read_text()

    def section(page, title):
        return page.split(f"## {title}\n")[1].split("\n## ")[0]

    for title in ("Offline scenario", "Serving overhead: Triton vs native",
                  "Accuracy on Triton"):
        assert section(half, title) == section(whole, title), title
    apart = "Not in this folder: measured by a run of its own"
    assert section(half, "Online scenario").strip().startswith(apart)
    assert "| perf_analyzer online | not in this folder |" in half
    assert "**Online** peak: not measured" in half
    assert (folder / "plots/offline_throughput.png").read_bytes()[:4] == b"\x89PNG"
    assert not (folder / "plots/online_latency.png").exists()

    (folder / "online.csv").write_bytes((built / "online.csv").read_bytes())
    result = assemble()  # online.json not beside it: refused, naming the missing file
    assert result.returncode != 0 and "online.json" in result.stderr, result.stderr
    assert (folder / "README.md").read_text() == half  # the earlier page kept
    for name in ("online.json", "floor.csv", "rate.csv", "rate.json"):
        if (built / name).is_file():
            shutil.copy(built / name, folder / name)
    assert assemble().returncode == 0
    assert (folder / "README.md").read_text() == whole


def test_a_configuration_is_gathered_from_its_runs_results_folders(tiny_build, tmp_path):
    """assemble_configuration.py --from: each run's results folder (as lanes.tar brings it
    back) gives the steps it measured, the first one the build's, and the page is the one
    the pipeline's own rule built; two runs that measured one step are refused before
    anything is copied."""
    built = tiny_build / RUN

    def run_of(name, drop):  # a run's results folder, without the steps it did not run
        folder = tmp_path / name / RUN
        shutil.copytree(built, folder)
        for step in drop:
            for path in [*folder.glob(f"{step}.*"), *folder.glob(f"logs/{step}*"),
                         *folder.glob(f"benchmarks/{step}.tsv"),
                         *folder.glob(f"history/{step}-*")]:
                path.unlink()
        return tmp_path / name / "results"

    offline = run_of("offline-run", ("online", "floor", "rate"))
    online = run_of("online-run", ("offline", "native"))

    def assemble(*runs):
        return subprocess.run(
            [sys.executable, str(ROOT / "scripts/results_tools/assemble_configuration.py"), RUN,
             "--configfile", str(TINY), "--from", *map(str, runs)],
            cwd=tmp_path, capture_output=True, text=True)

    result = assemble(offline, offline)
    assert result.returncode != 0 and "offline was measured by" in result.stderr, result.stderr
    assert not (tmp_path / RUN).exists()
    result = assemble(offline, tmp_path / "nowhere")
    assert result.returncode != 0 and "nowhere" in result.stderr, result.stderr
    result = assemble(offline, online)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / RUN
    assert (folder / "README.md").read_text() == (built / "README.md").read_text()
    for name in ("logs/offline_server.log", "logs/online_perf_analyzer.log",
                 "benchmarks/floor.tsv", "logs/conversion_check.log", "native.json"):
        assert (folder / name).read_bytes() == (built / name).read_bytes(), name
    assert not (folder / "logs/online_plot.log").exists()  # a report's log: not a step's
    # a folder whose offline run measured another configuration is refused
    other = "results/tft-tiny/cpu/ts-script_fp32"
    shutil.copytree(folder, tmp_path / other)
    result = subprocess.run([sys.executable,
                             str(ROOT / "scripts/results_tools/assemble_configuration.py"),
                             other, "--configfile", str(TINY)],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode != 0, result.stdout
    assert "measured for tft-tiny/cpu/onnx/fp32, not the folder's tft-tiny/cpu/ts-script/fp32" \
        in result.stderr, result.stderr
