"""Why a perf_analyzer run failed, where no retry mends it, and what a level's requests
need of the host: named at once (a signal, a dead stub, a full /dev/shm, the OOM killer),
and a level that cannot fit refused before a server starts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import psutil

from ..measurement.isolation import SHM
from ..tensors import numpy_dtype


class PerfError(RuntimeError):
    """perf_analyzer failed or did not reach a stable measurement; `exit_code`: its own,
    where it failed rather than did not settle."""

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code


class PerfDeath(PerfError):
    """A run that ended for a reason no retry mends: perf_analyzer killed by a signal, the
    python backend's stub dead, /dev/shm full."""


# What perf_analyzer prints when a python-backend model's stub process has died
STUB_DEAD = re.compile(r"Stub process '([^']+)' is not healthy")


def shm_space() -> tuple[int, int] | None:
    """/dev/shm's free and total bytes (None where the host has none)."""
    try:
        st = os.statvfs(SHM)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def oom_kills() -> int | None:
    """The processes the kernel's OOM killer has ended since boot (/proc/vmstat), or None."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def death(result: subprocess.CompletedProcess, row, run: dict,
          ooms_before: int | None = None) -> str | None:
    """What ended a failed run, where a retry cannot help; None where it may.
    `ooms_before`: oom_kills() when the run started (an OOM kill since is named)."""
    why = None
    if result.returncode < 0:
        name = signal.Signals(-result.returncode).name
        why = f"perf_analyzer was killed by {name}"
        space = shm_space()
        if name == "SIGBUS" and row.shared_memory == "system" and space:  # a page it lacked
            why += (f": a system shared-memory region it wrote had no memory behind it, "
                    f"/dev/shm has {space[0]} bytes free of {space[1]} (full, or a region "
                    "truncated under it)")
    stub = STUB_DEAD.search(result.stdout + result.stderr)
    if stub and not why:
        why = (f"the python backend's stub process of '{stub.group(1)}' died (killed: see "
               "the server log)")
    ooms = oom_kills()
    if why and ooms_before is not None and ooms is not None and ooms > ooms_before:
        size = request_bytes(run["model"], row)
        why += (f"; the kernel's OOM killer ended {ooms - ooms_before} process(es) meanwhile: "
                "out of memory" + (f" (a request's inputs and outputs: {size:,} bytes)"
                                   if size else ""))
    return why


# Copies of a request's inputs and outputs a measurement holds at once, at the least:
# perf_analyzer's data, its shared-memory regions or request, the server's buffers
IO_COPIES = 3


def request_bytes(model: dict, row) -> int | None:
    """A request's inputs and outputs at the row's batch, in bytes; None where a tensor's
    size is not known before it is sent (a variable dimension, strings, an ensemble's
    request)."""
    tensors = [*model["inputs"], *model["outputs"]]
    if row.shapes or any(d < 0 for t in tensors for d in t["dims"]) or any(
            t["dtype"] == "BYTES" for t in tensors):
        return None
    return output_bytes(tensors, row.batch)


def check_fits(run: dict, rows: list) -> None:
    """Refuse, before a server starts, a level whose requests cannot fit this host: their
    inputs and outputs alone, IO_COPIES times over (the model's own memory comes on top),
    past the memory available, or its system shared-memory regions past /dev/shm's free
    space. Such a batch used to end, after retries, as a stub the OOM killer ended,
    reported as no stable measurement."""
    available = psutil.virtual_memory().available
    space = shm_space()
    for row in rows:
        size = request_bytes(run["model"], row)
        if size is None:
            continue
        where = f"batch {row.batch} ({row.shared_memory} shared memory)"
        if size * IO_COPIES > available:
            raise ValueError(
                f"{where}: a request's inputs and outputs take {size:,} bytes, {IO_COPIES} "
                f"copies of them {size * IO_COPIES / 2**30:.1f} GiB, more than the "
                f"{available / 2**30:.1f} GiB of memory available here; lower the batch "
                "sizes (offline.batch_sizes, online.batch_size) or measure on a larger host")
        if row.shared_memory == "system" and space and size > space[0]:
            raise ValueError(
                f"{where}: its shared-memory regions take {size:,} bytes, more than the "
                f"{space[0]:,} bytes free in /dev/shm; lower the batch "
                "sizes, free /dev/shm, or measure without shared memory")


class PerfTimeout(PerfError):
    """perf_analyzer did not finish within its time limit (and was killed)."""


def output_bytes(outputs: list[dict], batch: int) -> int:
    per_sample = sum(
        int(np.prod(t["dims"])) * np.dtype(numpy_dtype(t["dtype"])).itemsize for t in outputs
    )
    return per_sample * batch
