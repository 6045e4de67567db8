"""Benchmark: what planning and an incremental re-run cost, against a full build, for the
full configured matrix.

For every valid key of the matrix (model × GPU × backend × precision), plan a full build,
mark every output as built (`snakemake --touch`, which records the jobs' metadata), then
time the dry-run of: nothing changed, a changed online concurrency list of one model, a
changed weights seed of one model. Prints jobs and dry-run times as ratios to the full
plan, the dry-run of one configuration's offline.csv in an empty folder (the median of
three: what `snakemake -n <one target>` costs a user; the goal is under 2 s), and
Snakemake's own floor: a workflow of the same shape (as many models and
configurations, the same chain of rules, `touch` commands, no Python functions) planned
by the same Snakemake. No measurement runs: it exercises only Snakemake's planning.

    python scripts/benchmarks/bench_incremental.py [--model tft]
    python scripts/benchmarks/bench_incremental.py --smoke  # the tests' tiny matrix, cpu key
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from deploybench.records import layout
from deploybench.settings.config import deep_merge
from deploybench.settings.resolve import Settings

ROOT = Path(__file__).resolve().parents[2]

SMOKE = ROOT / "tests" / "config" / "tiny.yaml"
# The smoke run's keys: the tiny matrix on the cpu key. Its counts check as well as the
# whole matrix's, and marking 415 jobs built (--touch) took 45 s, a tenth of a second a job.
SMOKE_MATRIX = {"matrix": {"gpus": ["cpu"]}}


def snakemake(workdir: Path, snakefile: Path, *args: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile),
           "--directory", str(workdir), "-c1", *args, "--quiet", "rules"]
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"snakemake failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return time.perf_counter() - start, result.stdout


def job_count(text: str) -> int:
    match = re.search(r"^total\s+(\d+)", text, re.M)
    return int(match.group(1)) if match else 0


def materialise(workdir: Path, config: list[str], targets: list[str]) -> None:
    """Create every output of the plan (empty), then let Snakemake mark them built."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), *config, "--detailed-summary", *targets]
    summary = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in summary.splitlines()[1:]:
        path = workdir / line.split("\t")[0]
        if layout.is_directory(path):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    snakemake(workdir, ROOT / "Snakefile", *config, "--touch", "--forceall", *targets)


# Snakemake's floor: the pipeline's chain of rules as `touch` commands over plain patterns.
FLOOR = '''
KEYS = [(m, c) for m in range({models}) for c in range({configurations})][:{keys}]
C = "results/m{{model}}/c{{config}}"
S = "results/m{{model}}/source"
REPORTED = [C + f for f in ("/conversion_check.csv", "/accuracy.csv", "/offline.csv",
            "/online.csv", "/offline.json", "/online.json", "/plots/a.png", "/plots/b.png",
            "/plots/c.png", "/native.csv", "/native.json", "/floor.csv")]
rule all:
    input: [f"results/m{{m}}/c{{c}}/README.md" for m, c in KEYS]
rule weights:
    output: S + "/weights.pt"
    shell: "touch {{output}}"
rule eval_set:
    input: S + "/weights.pt"
    output: S + "/eval.npz"
    shell: "touch {{output}}"
rule perf_data:
    input: S + "/eval.npz"
    output: S + "/perf_data.json"
    shell: "touch {{output}}"
rule export:
    input: S + "/weights.pt", S + "/eval.npz"
    output: "results/m{{model}}/export/model.onnx"
    shell: "touch {{output}}"
rule convert:
    input: "results/m{{model}}/export/model.onnx"
    output: C + "/converted/model.onnx"
    shell: "touch {{output}}"
rule conversion_check:
    input: C + "/converted/model.onnx", S + "/eval.npz"
    output: C + "/conversion_check.csv"
    shell: "touch {{output}}"
rule native:
    input: C + "/converted/model.onnx", S + "/eval.npz"
    output: C + "/native.csv", C + "/native.json"
    shell: "touch {{output}}"
rule floor:
    input: S + "/perf_data.json"
    output: C + "/floor.csv", C + "/floor.json"
    shell: "touch {{output}}"
rule model_repository:
    input: C + "/converted/model.onnx", C + "/conversion_check.csv"
    output: directory(C + "/model_repository")
    shell: "mkdir {{output}}"
rule accuracy:
    input: C + "/model_repository", S + "/eval.npz"
    output: C + "/accuracy.csv", C + "/accuracy.json"
    shell: "touch {{output}}"
rule offline:
    input: C + "/model_repository", S + "/perf_data.json", C + "/accuracy.csv"
    output: C + "/offline.csv", C + "/offline.json"
    shell: "touch {{output}}"
rule online:
    input: C + "/model_repository", S + "/perf_data.json", C + "/accuracy.csv"
    output: C + "/online.csv", C + "/online.json"
    shell: "touch {{output}}"
rule plots:
    input: C + "/offline.csv"
    output: C + "/plots/a.png", C + "/plots/b.png"
    shell: "touch {{output}}"
rule online_plot:
    input: C + "/online.csv"
    output: C + "/plots/c.png"
    shell: "touch {{output}}"
rule configuration_report:
    input: REPORTED, S + "/weights.pt"
    output: C + "/README.md"
    shell: "touch {{output}}"
'''


def floor(work: Path, models: int, keys: int) -> tuple[float, int]:
    """Dry-run time and jobs of Snakemake's floor for `keys` configurations of `models`."""
    snakefile = work / "floor" / "Snakefile"
    snakefile.parent.mkdir()
    snakefile.write_text(FLOOR.format(models=models, configurations=-(-keys // models),
                                      keys=keys))
    seconds, out = snakemake(snakefile.parent, snakefile, "-n")
    return seconds, job_count(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model whose parameters change (default: the "
                                        "matrix's first)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"plan the tests' tiny matrix ({SMOKE.relative_to(ROOT)}) "
                             "on the cpu key")
    args = parser.parse_args()
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    configfiles: list[str] = []
    if args.smoke:
        config = deep_merge(deep_merge(config, yaml.safe_load(SMOKE.read_text())), SMOKE_MATRIX)
        configfiles = ["--configfile", str(SMOKE)]
    settings = Settings(config)
    keys = settings.matrix()
    model = args.model or config["matrix"]["models"][0]
    targets = [layout.fill(layout.configuration(layout.CONFIGURATION_REPORT), model=m, gpu=g,
                           backend=b, precision=p) for m, g, b, p in keys]
    snakefile = ROOT / "Snakefile"
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:  # the smoke run's keys, as Snakemake reads them
            (Path(tmp) / "smoke.yaml").write_text(yaml.safe_dump(SMOKE_MATRIX))
            configfiles.append(str(Path(tmp) / "smoke.yaml"))
        work = Path(tmp) / "work"
        work.mkdir()
        full_s, full_out = snakemake(work, snakefile, *configfiles, "-n", *targets)
        one = layout.fill(layout.configuration("offline.csv"), **config["targets"][0])
        empty = Path(tmp) / "one"
        empty.mkdir()
        runs = 1 if args.smoke else 3  # the median of three; the smoke run checks counts
        one_runs = sorted(snakemake(empty, snakefile, *configfiles, "-n", one)
                          for _ in range(runs))
        one_s, one_out = one_runs[len(one_runs) // 2]
        floor_s, floor_jobs = floor(Path(tmp), len({k[0] for k in keys}), len(keys))
        materialise(work, configfiles, targets)
        noop_s, noop_out = snakemake(work, snakefile, *configfiles, "-n", *targets)

        models = work / "models"
        models.mkdir()
        for path in (ROOT / config["models_dir"]).glob("*.yaml"):
            (models / path.name).write_text(path.read_text())
        changed = yaml.safe_load((models / f"{model}.yaml").read_text())
        changed["online"]["concurrency"] = changed["online"]["concurrency"][:-1]
        (models / f"{model}.yaml").write_text(yaml.safe_dump(changed))
        moved = ["--config", f"models_dir={models}"]
        online_s, online_out = snakemake(work, snakefile, *configfiles, "-n", *targets, *moved)
        changed["weights"]["seed"] += 1
        (models / f"{model}.yaml").write_text(yaml.safe_dump(changed))
        seed_s, seed_out = snakemake(work, snakefile, *configfiles, "-n", *targets, *moved)

    full = job_count(full_out)
    rows = [("full plan", full, full_s),
            (f"one configuration ({one})", job_count(one_out), one_s),
            ("Snakemake's floor (same shape, no functions)", floor_jobs, floor_s),
            ("nothing changed", job_count(noop_out), noop_s),
            (f"{model}: online concurrency list", job_count(online_out), online_s),
            (f"{model}: weights seed", job_count(seed_out), seed_s)]
    print(f"matrix: {len(keys)} configurations ({len({k[0] for k in keys})} models), "
          f"{os.cpu_count()} CPUs")
    width = max(len(name) for name, _, _ in rows)
    print(f"{'case':{width}s} {'jobs':>6s} {'jobs/full':>10s} {'dry-run s':>10s} "
          f"{'time/full':>10s}")
    for name, jobs, seconds in rows:
        print(f"{name:{width}s} {jobs:6d} {jobs / full:10.3f} {seconds:10.2f} "
              f"{seconds / full_s:10.2f}")
    print(f"full plan / Snakemake's floor: {full_s / floor_s:.2f}")


if __name__ == "__main__":
    main()
