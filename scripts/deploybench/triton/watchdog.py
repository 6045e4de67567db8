"""What a step starts ends with the step, however the step ends.

A server runs in a session of its own (so that its stop reaches its stubs) and
perf_analyzer in one of its own too, so neither dies with the step by itself: a step
killed by SIGKILL (the OOM killer's signal) used to leave them running, measuring beside
the re-run. `Watchdog` starts a small process beside them that holds one end of a pipe
whose other end only the step holds; when the step ends, in any way, the kernel closes
its end, and the watchdog kills every process group it was told of and removes the
files it was given (the server's shared memory). Run as a script (no package imports,
no site: it starts in milliseconds).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys


class Watchdog:
    """`add(pgid)` / `discard(pgid)` the process groups to kill when the step ends;
    `close()` ends the watchdog now (after it has killed what is still listed)."""

    def __init__(self, paths: list[str] = ()):
        read, self._write = os.pipe()  # not inherited: only this process holds the end
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, *paths], stdin=read,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)  # a Ctrl-C or a job's SIGTERM reaches the step only
        finally:
            os.close(read)

    def _send(self, line: str) -> None:
        if self._write is not None:
            os.write(self._write, f"{line}\n".encode())

    def add(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def discard(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def close(self) -> None:
        if self._write is not None:
            os.close(self._write)
            self._write = None
            self._proc.wait()


def _main(patterns: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:  # until the step's end of the pipe closes
        (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:  # ended already
            pass
    for pattern in patterns:
        for path in glob.glob(pattern):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


if __name__ == "__main__":
    _main(sys.argv[1:])
