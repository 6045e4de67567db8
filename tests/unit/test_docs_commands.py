"""The docs' commands run as written: every `snakemake` and `deploybench` line of a fenced
block of the README and docs/ (continuation lines joined), planned on this checkout with `-n`
(a build is what the e2e tests do) or, where planning does not apply, run in a form that
builds nothing (a benchmark's --help, `ship --no-write`). A command that a reader would copy
and that fails (a target after `--config`, a wrong flag, a script that no longer imports)
fails here."""

from __future__ import annotations

from pathlib import Path

from testkit.docs_commands import commands

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_hold_commands_of_both_kinds():
    found = [line for _, line in commands()]
    assert sum(line.startswith("snakemake") for line in found) >= 10
    assert sum(line.startswith("deploybench") for line in found) >= 4
