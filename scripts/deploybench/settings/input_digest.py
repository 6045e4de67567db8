"""The user's inputs identified by their content: a checkpoint (`weights.checkpoint`) or a
dataset (`data.path`), a file or a folder.

Snakemake re-runs a job for an input newer than its outputs only, and `tar x`, `unzip`,
`cp -p` and `rsync -a` give a replaced file its old mtime. So a rule takes, instead of the
user's files, a stamp of their content: `stamp` writes the digest (sha256 over each file's
relative name and bytes, in name order) into a stamp file when it differs from the one the
stamp holds, and leaves the stamp alone otherwise. Its mtime moves exactly when the content
changed: a replaced, restored or swapped input re-runs what read it; a touch re-runs
nothing.

Planning stays cheap for an input that did not change: each file's hash is kept in a cache
beside the stamp, keyed by its (device, inode, size, mtime, ctime); ctime is the kernel's
and no copy tool can set it back, so only files whose key changed are read again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from ..records import atomic

MAX_FILES = 10_000  # more is not a checkpoint or a dataset (`data.path: /usr`)
# A file changed less than this before it was hashed is not cached: a write within the
# file system's timestamp granularity could leave its key unchanged ("racy" files, as git).
RACY_NS = 2_000_000_000
_CHUNK = 1 << 20
_ANNOUNCE_BYTES = 1 << 30  # hashing more at once says so on stderr


class InputError(ValueError):
    """An input that cannot be a checkpoint or a dataset: missing, or far too many files."""


def missing(model: str, settings: dict) -> str | None:
    """Why a model's configured checkpoint or dataset cannot be read (None where both can,
    or are not set): every one of them named at once, while planning, dry run or not."""
    wanted = {"weights.checkpoint": settings["weights"]["checkpoint"],
              "data.path": settings["data"]["path"]}
    gone = [f"{key} '{path}'" for key, path in wanted.items() if path and not
            os.path.exists(path)]
    if not gone:
        return None
    return (f"model '{model}': {' and '.join(gone)} {'does' if len(gone) == 1 else 'do'} not "
            f"exist (from {os.getcwd()}); give existing paths, or null for a seeded "
            "initialisation and a generated dataset")


def _walk(root: Path, what: str) -> list[tuple[str, Path]]:
    """(relative name, path) of every regular file under `root` (a file: itself), symbolic
    links followed (each folder once), by name."""
    if root.is_file():
        return [(root.name, root)]
    if not root.is_dir():
        raise InputError(f"{what} '{root}' does not exist")
    found, seen = [], set()
    for folder, dirs, names in os.walk(root, followlinks=True):
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:  # a link back to a folder already walked
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in names:
            path = Path(folder, name)
            if path.is_file():  # no fifo, socket or device: nothing a loader reads
                found.append((path.relative_to(root).as_posix(), path))
                if len(found) > MAX_FILES:
                    raise InputError(
                        f"{what} '{root}' holds more than {MAX_FILES:,} files: a checkpoint "
                        "or a dataset folder is expected (is it the right path?)")
    return sorted(found)


def _key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _read_cache(path: Path) -> dict:
    try:
        cached = json.loads(path.read_text())
        return cached if isinstance(cached, dict) else {}
    except (OSError, ValueError):  # none yet, or unreadable: every file is hashed
        return {}


def digest(root: str | Path, cache: str | Path, what: str = "input") -> str:
    """sha256 over the relative names and the content of the files under `root` (or of the
    file `root`); the hashes of files whose key did not change come from `cache` (a JSON
    file, rewritten when it changes). `what` names the input in errors."""
    root, cache = Path(root), Path(cache)
    files = _walk(root, what)
    known = _read_cache(cache)
    stats = {name: os.stat(path) for name, path in files}
    fresh = {name: path for name, path in files
             if known.get(name, [None])[:-1] != _key(stats[name])}
    size = sum(stats[name].st_size for name in fresh)
    if size > _ANNOUNCE_BYTES:
        print(f"deploybench: hashing {size / 2**30:.1f} GiB of {what} '{root}' (once: "
              "later runs read only the files that change)", file=sys.stderr, flush=True)
    now = time.time_ns()
    entries = {}
    for name, _ in files:
        key = _key(stats[name])
        entries[name] = key + [_hash(fresh[name]) if name in fresh else known[name][-1]]
    h = hashlib.sha256()
    for name, entry in entries.items():
        h.update(name.encode() + b"\0" + entry[-1].encode() + b"\n")
    kept = {name: entry for name, entry in entries.items()
            if now - stats[name].st_ctime_ns > RACY_NS}
    if kept != known:
        with atomic.output(cache) as tmp:
            tmp.write_text(json.dumps(kept, indent=0))
    return h.hexdigest()


def stamp(root: str | Path, stamp_file: str | Path, what: str = "input") -> Path:
    """`stamp_file`, holding the digest of `root` (digest; its cache beside it): rewritten
    (atomically) only when that differs from what it holds, so that its mtime says when
    the content last changed."""
    stamp_file = Path(stamp_file)
    text = f"sha256:{digest(root, stamp_file.with_suffix('.files.json'), what)}\n"
    try:
        unchanged = stamp_file.read_text() == text
    except OSError:
        unchanged = False
    if not unchanged:
        with atomic.output(stamp_file) as tmp:
            tmp.write_text(text)
    return stamp_file
