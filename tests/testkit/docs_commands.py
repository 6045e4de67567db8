"""The shell commands the docs give."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from testkit.workflow import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
# what is not a command to copy as it is: placeholders, the reader's own model (`mine`: its
# file is theirs; tests/unit/test_add_model.py runs those commands on a model it makes), and the
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
