"""Write outputs atomically: a failed or interrupted step never leaves a partial file
that could pass for a result, and never destroys an earlier good one. What a killed write
left (`.<name>.tmp-<pid><suffix>` of a process that is gone: kill -9, the OOM killer) is
removed by the next write of that output."""

from __future__ import annotations

import glob
import io
import json
import os
import re
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
    remove_stale(path)
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


def remove_stale(path: Path) -> list[Path]:
    """The temporary siblings of `path` that writes killed before their end left (their
    process gone; a live one's is its write in progress), removed: what was removed."""
    pattern = re.compile(rf"\.{re.escape(path.stem)}\.tmp-(\d+){re.escape(path.suffix)}")
    removed = []
    for sibling in path.parent.glob(f".{glob.escape(path.stem)}.tmp-*"):
        match = pattern.fullmatch(sibling.name)
        if not match or alive(int(match.group(1))):
            continue
        if sibling.is_dir() and not sibling.is_symlink():
            shutil.rmtree(sibling, ignore_errors=True)
        else:
            sibling.unlink(missing_ok=True)
        removed.append(sibling)
    return removed


def alive(pid: int) -> bool:
    """Whether process `pid` runs (another user's counts as running: not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: not ours to judge
        return True
    return True


def _replace_dir(tmp: Path, path: Path) -> None:
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


# results/ lives in git: its plots as palette PNGs, its JSON without indentation
PNG_COLOURS = 128
COMPACT = (",", ":")


def palette_png(png: bytes) -> bytes:
    """A PNG as a 128-colour palette image, optimised: a plot's lines, text and fills look
    the same in about a third of the bytes."""
    from PIL import Image  # Matplotlib's own dependency

    with Image.open(io.BytesIO(png)) as image:
        palette = image.convert("RGB").quantize(PNG_COLOURS, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()


def write_png(fig, path: str | Path, **savefig) -> None:
    """A Matplotlib figure (`savefig`'s options) as a palette PNG, whole or not at all."""
    rendered = io.BytesIO()
    fig.savefig(rendered, format="png", **savefig)
    with output(path) as tmp:
        tmp.write_bytes(palette_png(rendered.getvalue()))


def json_text(data) -> str:
    """A result's JSON (a measurement's settings and provenance), without indentation or
    spaces: files a program reads, committed by the hundred. Files a person edits stay
    indented."""
    return json.dumps(data, separators=COMPACT)
