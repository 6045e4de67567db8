"""The `deploybench` console script, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.workflow import ROOT

TINY = ROOT / "tests" / "config" / "tiny.yaml"
COMMAND = Path(sys.executable).with_name("deploybench")


def deploybench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(COMMAND), *args], capture_output=True, text=True, cwd=cwd)
