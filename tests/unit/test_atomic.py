"""Outputs written whole or not at all (deploybench.records.atomic): what a killed write leaves is
removed by the next write of that output, never a write in progress, never a result."""

import signal
import subprocess
import sys
import textwrap

from deploybench.records import atomic

# A write killed (the OOM killer's signal) once its temporary file exists, empty
KILLED = textwrap.dedent("""
    import os, signal, sys
    from deploybench.records import atomic
    with atomic.output(sys.argv[1]) as tmp:
        tmp.write_text("")
        os.kill(os.getpid(), signal.SIGKILL)
""")


def test_what_a_killed_write_left_is_removed_by_the_next_write(tmp_path):
    """A killed write used to leave `.offline.tmp-<pid>.csv` (0 bytes) beside the output
    for good. The next write of that output removes it, and leaves alone the earlier
    result until it is replaced, a live process's write in progress and another output's
    leftover (removed by that output's next write)."""
    out = tmp_path / "offline.csv"
    out.write_text("batch\n1\n")  # an earlier good result
    killed = subprocess.run([sys.executable, "-c", KILLED, str(out)])
    assert killed.returncode == -signal.SIGKILL
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".offline.tmp-")]
    assert len(left) == 1 and left[0].suffix == ".csv" and left[0].stat().st_size == 0, left
    assert out.read_text() == "batch\n1\n"
    other = left[0].with_suffix(".json")  # offline.json's, of the same killed step
    other.write_text("")
    with subprocess.Popen(["sleep", "30"]) as live:
        in_progress = tmp_path / f".offline.tmp-{live.pid}.csv"
        in_progress.write_text("half")
        with atomic.output(out) as tmp:
            tmp.write_text("batch\n2\n")
        live.kill()
    assert not left[0].exists() and in_progress.exists() and other.exists()
    assert out.read_text() == "batch\n2\n"
