"""Write outputs atomically: a failed or interrupted step never leaves a partial file
that could pass for a result, and never destroys an earlier good one."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def output(path: str | Path):
    """Yield a temporary sibling path; move it onto `path` only if the body succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the suffix kept last: some writers insist on it (AOTInductor's .pt2)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        if tmp.is_dir() and path.is_dir():
            _replace_dir(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def _replace_dir(tmp: Path, path: Path) -> None:
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
