"""Two real measuring steps and a lock file swapped by another user: they never overlap."""

import json
import subprocess
import tempfile
from pathlib import Path

from testkit.isolation import _start_step


# two real measuring steps
def test_a_lock_file_swapped_by_another_user_never_lets_two_measurements_overlap(
        toy_repo, other_user):  # noqa: F811
    """Another user makes the lock file first (after a reboot, say), measurement A takes
    it, the user removes it and makes it again, measurement B starts: B used to take the
    new file at once (waited 0 s) and both measured together, each recording that it ran
    alone. Now A makes the file root's as it takes it, so the user cannot remove it, and B
    waits for A: their recorded lock times do not overlap."""
    work, _ = toy_repo
    folder = Path(tempfile.mkdtemp(prefix="deploybench-swap-", dir="/tmp"))
    try:
        folder.chmod(0o1777)  # root's, sticky and world-writable: the host folder's kind
        lock = folder / "cpu.lock"
        assert other_user(["touch", str(lock)]).returncode == 0
        env = {"DEPLOYBENCH_LOCK_DIR": str(folder), "STEP_DEVICE": "cpu"}
        (folder / "a").mkdir()
        (folder / "b").mkdir()
        steps = [_start_step(work / "repo", folder / "a", isolate=False, requests=400, env=env)]
        started = json.loads(steps[0].stdout.readline())  # A holds the lock, and measures
        swap = other_user(["sh", "-c", f"rm -f {lock} && touch {lock}"])
        steps.append(_start_step(work / "repo", folder / "b", isolate=False, requests=100,
                                 env=env))
        ended = [json.loads(s.stdout.read().strip().splitlines()[-1]) for s in steps]
        assert [s.wait() for s in steps] == [0, 0] and started
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=True)
    a, b = (e["lock"] for e in ended)
    assert a["lock"] == b["lock"] == str(lock)
    assert b["acquired_at"] >= a["released_at"] and b["waited_s"] > 0, (a, b)
    assert swap.returncode != 0 and "Operation not permitted" in swap.stderr, swap
