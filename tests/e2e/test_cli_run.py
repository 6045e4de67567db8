"""`deploybench run`: the real Snakemake builds a target with the arguments passed on."""

from __future__ import annotations

import sys
from pathlib import Path

from testkit.cli import TINY, deploybench
from testkit.workflow import ROOT


def test_run_builds_a_target_with_snakemake_and_passes_arguments_on(tmp_path):
    """A real build through the command: a tiny model's evaluation set, in a work folder
    named after `--`; a second run plans nothing."""
    target = "results/tft-tiny/source/eval.npz"
    extra = ["--", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
             "--cores", "1"]
    result = deploybench("run", target, "-c", str(TINY), *extra)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stderr.startswith(f"+ {Path(sys.executable).with_name('snakemake')} {target}")
    built = tmp_path / target
    assert built.is_file() and built.stat().st_size > 0
    again = deploybench("plan", target, "-c", str(TINY), *extra)
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr
