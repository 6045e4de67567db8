"""The docs' commands run as written: every `snakemake` and `deploybench` line of a fenced
block of the README and docs/ (continuation lines joined), planned on this checkout with `-n`
(a build is what the e2e tests do) or, where planning does not apply, run in a form that
builds nothing (a benchmark's --help, `ship --no-write`). A command that a reader would copy
and that fails (a target after `--config`, a wrong flag, a script that no longer imports)
fails here."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
# what is not a command to copy as it is: placeholders, the reader's own model (`mine`: its
# file is theirs; tests/test_add_model.py runs those commands on a model it makes), and the
# HTML report (its own e2e test builds it)
SKIP = ("...", "<", "--report", " mine ")


def commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", doc.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split("  #")[0].strip()
                first = line.split(" ", 1)[0]
                if first in ("snakemake", "deploybench") and not any(s in line for s in SKIP):
                    found.append((f"{doc.relative_to(ROOT)}: {line[:60]}", line))
    return found


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


def test_the_docs_hold_commands_of_both_kinds():
    found = [line for _, line in commands()]
    assert sum(line.startswith("snakemake") for line in found) >= 10
    assert sum(line.startswith("deploybench") for line in found) >= 4


@pytest.mark.parametrize("line", [line for _, line in commands()],
                         ids=[name for name, _ in commands()])
@pytest.mark.e2e
def test_a_documented_command_runs_as_written(line):
    result = subprocess.run(planned(line), capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
