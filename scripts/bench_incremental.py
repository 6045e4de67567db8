"""Benchmark: what an incremental re-run costs against a full rebuild, for the full matrix.

For every valid key of the configured matrix (model × GPU × backend × precision), plan a
full build, mark every output as built (`snakemake --touch`, which records the jobs'
metadata), then measure the dry-run of: nothing changed, a changed online concurrency
list of one model, a changed weights seed of one model. Prints jobs and dry-run times as
ratios to the full build. No measurement runs: it exercises only Snakemake's planning.

    python scripts/bench_incremental.py [--model tft]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from deploybench.config import Settings  # noqa: E402


def snakemake(workdir: Path, *args: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "-c1", "--quiet", "rules", *args]
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"snakemake failed:\n{result.stderr[-3000:]}")
    return time.perf_counter() - start, result.stdout


def job_count(text: str) -> int:
    match = re.search(r"^total\s+(\d+)", text, re.M)
    return int(match.group(1)) if match else 0


def materialise(workdir: Path, targets: list[str]) -> None:
    """Create every output of the plan (empty), then let Snakemake mark them built."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "--detailed-summary", *targets]
    summary = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in summary.splitlines()[1:]:
        path = workdir / line.split("\t")[0]
        if path.name in ("data", "model_repository"):  # directory outputs
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    snakemake(workdir, "--touch", "--forceall", *targets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tft", help="model whose parameters change")
    args = parser.parse_args()
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    settings = Settings(config)
    keys = settings.matrix()
    targets = [f"results/{m}/{g}/{b}_{p}/README.md" for m, g, b, p in keys]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        full_s, full_out = snakemake(work, "-n", *targets)
        materialise(work, targets)
        noop_s, noop_out = snakemake(work, "-n", *targets)

        models = work / "models"
        models.mkdir()
        for path in (ROOT / config["models_dir"]).glob("*.yaml"):
            (models / path.name).write_text(path.read_text())
        changed = yaml.safe_load((models / f"{args.model}.yaml").read_text())
        changed["online"]["concurrency"] = changed["online"]["concurrency"][:-1]
        (models / f"{args.model}.yaml").write_text(yaml.safe_dump(changed))
        online_s, online_out = snakemake(work, "-n", *targets, "--config",
                                         f"models_dir={models}")
        changed["weights"]["seed"] += 1
        (models / f"{args.model}.yaml").write_text(yaml.safe_dump(changed))
        seed_s, seed_out = snakemake(work, "-n", *targets, "--config", f"models_dir={models}")

    full = job_count(full_out)
    rows = [("full rebuild", full, full_s), ("nothing changed", job_count(noop_out), noop_s),
            (f"{args.model}: online concurrency list", job_count(online_out), online_s),
            (f"{args.model}: weights seed", job_count(seed_out), seed_s)]
    print(f"matrix: {len(keys)} configurations ({len(settings.config['matrix']['models'])} "
          f"models), {os.cpu_count()} CPUs")
    print(f"{'case':40s} {'jobs':>6s} {'jobs/full':>10s} {'dry-run s':>10s} {'time/full':>10s}")
    for name, jobs, seconds in rows:
        print(f"{name:40s} {jobs:6d} {jobs / full:10.3f} {seconds:10.2f} {seconds / full_s:10.2f}")


if __name__ == "__main__":
    main()
