"""Copying artifacts: a model is a file or a folder (a SavedModel, an ensemble's parts)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def copy_artifact(src: Path, dst: Path) -> None:
    """A file, or a folder (a SavedModel)."""
    if Path(src).is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def _link(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def link_tree(src: Path, dst: Path) -> None:
    """Hard links of `src`'s files under `dst` (copies across file systems): embedding
    tables can be large, and every configuration of a model shares them."""
    shutil.copytree(src, dst, copy_function=_link)


def link_artifact(src: Path, dst: Path) -> None:
    """A file or a folder as hard links (copies across file systems): per-batch
    deployments serve one artifact."""
    if Path(src).is_dir():
        link_tree(src, dst)
    else:
        _link(src, dst)


def digest(paths: list[Path]) -> str:
    """A short hash of files' names and contents (a rule's code, as a param: a change to
    the code, not a touch of its files, re-runs what it made)."""
    h = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]
