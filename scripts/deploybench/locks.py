"""Host-wide locks: one measurement at a time per device, across every process and user.

Snakemake's `bench_slot` keeps two measuring jobs of one invocation apart; a second
invocation in the same folder, another user's run, or two jobs a cluster places on one
node know nothing of it. A measuring step holds its device's lock (an flock on a file in
a shared folder, released by the kernel when the process ends, however it ends) from
before it starts a server or a runner until after it has stopped it.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def lock_dir() -> Path:
    """The shared folder of the lock files: DEPLOYBENCH_LOCK_DIR, else <tmp>/deploybench-locks
    (sticky and world-writable, as /tmp, so every user's runs can create their locks)."""
    configured = os.environ.get("DEPLOYBENCH_LOCK_DIR")
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / "deploybench-locks"
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        if not configured and path.stat().st_uid == os.getuid():
            path.chmod(0o1777)
    return path


def _open(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:  # another user's lock file: a read-only descriptor locks too
        return os.open(path, os.O_RDONLY)
    if os.fstat(fd).st_uid == os.getuid():
        os.fchmod(fd, 0o666)  # whoever measures next on this device may open it
    return fd


@contextmanager
def device_lock(device: str):
    """Hold the lock of `device` ("cpu", or a GPU's UUID); yields what a result records of
    it: the lock, how long this measurement waited for it, and (filled in on release)
    when it held it, as Unix times."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    path = lock_dir() / f"{name}.lock"
    fd = _open(path)
    start = time.time()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for device {device}: another measurement holds {path}",
                  file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        held = {"device": device, "lock": str(path), "acquired_at": time.time()}
        held["waited_s"] = round(held["acquired_at"] - start, 3)
        yield held
        held["released_at"] = time.time()
    finally:
        os.close(fd)  # releases the lock
