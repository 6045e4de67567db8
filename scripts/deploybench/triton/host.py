"""What a Triton server the pipeline starts takes of the host and gives back: free ports,
its shared-memory folder (and those a killed run left), the process group it runs in and
the python-backend stubs it leaves when it is killed."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
from contextlib import closing
from pathlib import Path

import psutil

from ..measurement.isolation import SHM
from ..records.atomic import alive

SHM_DIR = Path(SHM)
_SHM_FOLDER = re.compile(r"^deploybench-(\d+)-[0-9a-f]+")  # of the step's pid


def port_free(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out as free now (held open together so they differ)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def remove_stale_shared_memory() -> list[str]:
    """This user's shared-memory folders (and regions of older versions, named with a
    prefix) of steps whose process is gone (a killed run)."""
    removed = []
    for path in SHM_DIR.glob("deploybench-*") if SHM_DIR.is_dir() else []:
        match = _SHM_FOLDER.match(path.name)
        if not match or alive(int(match.group(1))):
            continue
        try:
            st = path.lstat()
            if st.st_uid != os.getuid():
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path.name)
        except FileNotFoundError:
            pass
    return removed


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_running = 0  # servers this process started and has not stopped


def adopt_orphans(adopt: bool) -> None:
    """While this process runs a server, make it the parent of its descendants that lose
    theirs: the stubs of a killed server come here to be reaped, instead of waiting as
    zombies for an init that in a container may never reap them."""
    global _running
    _running += 1 if adopt else -1
    if _running == (1 if adopt else 0):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(adopt), 0, 0, 0)


def children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def end_group(proc: subprocess.Popen, orderly: bool) -> None:
    """End a server started in a session of its own (start_new_session), with every process
    of its group, and reap the python-backend stubs handed to this process (adopt_orphans).
    `orderly`: asked to stop first (a container's docker client passes SIGTERM on, not
    SIGKILL); else killed at once (nothing is read from a server after its measurement,
    and Triton's orderly unload only waits: it polls its models once a second)."""
    group = proc.pid  # the server's, its stubs' (start_new_session)
    stubs = [p.pid for p in children(group) if group_of(p.pid) == group]
    if orderly and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:  # the server and its stubs (a container's that outlived its stop)
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for pid in stubs:  # handed to this process (adopt_orphans): reaped here
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # reaped already, or another process's child
            pass
    adopt_orphans(False)
