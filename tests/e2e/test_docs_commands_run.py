"""Every command the docs give runs as written (or plans, where it would measure)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from testkit.docs_commands import BIN, commands
from testkit.workflow import ROOT


def planned(line: str) -> list[str]:
    """The command as it is planned here: nothing built, nothing written into the tree."""
    words = shlex.split(line)
    if words[0] == "snakemake":
        return [str(BIN / "snakemake"), "-n", *words[1:]]
    sub = words[1]
    if sub in ("run", "plan"):
        return [str(BIN / "deploybench"), "plan", *words[2:]]
    if sub == "ship":
        return [str(BIN / "deploybench"), *words[1:], "--no-write"]
    if sub == "bench":
        return [str(BIN / "deploybench"), *words[1:3], "--help"]
    return [str(BIN / "deploybench"), *words[1:], "--help"]


@pytest.mark.parametrize("line", [line for _, line in commands()],
                         ids=[name for name, _ in commands()])
def test_a_documented_command_runs_as_written(line):
    result = subprocess.run(planned(line), capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
