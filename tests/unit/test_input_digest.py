"""The user's checkpoint and dataset identified by their content
(deploybench.settings.input_digest): the stamp a rule takes moves exactly when the content
changed, whatever the files' mtimes, and planning reads again only the files whose (inode,
size, mtime, ctime) changed."""

import os
import time

import pytest

from deploybench.settings import input_digest
from testkit.input_digest import _set_back


def _folder(path, files: dict[str, bytes]):
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path


def _stamped(root, stamp):
    path = input_digest.stamp(root, stamp)
    return path.read_text(), path.stat().st_mtime_ns


def test_the_stamp_moves_only_when_the_content_changes(tmp_path):
    data = _folder(tmp_path / "data", {"a.bin": b"one", "sub/b.bin": b"two"})
    stamp = tmp_path / "stamps" / "data.sha256"
    text, mtime = _stamped(data, stamp)
    assert text.startswith("sha256:") and len(text.strip()) == 7 + 64
    os.utime(data / "a.bin")  # a touch
    assert _stamped(data, stamp) == (text, mtime)
    (data / "a.bin").write_bytes(b"eno")  # same size, its old mtime back (cp -p, tar x)
    _set_back(data / "a.bin")
    changed, moved = _stamped(data, stamp)
    assert changed != text and moved > mtime
    (data / "a.bin").write_bytes(b"one")  # back as it was: the first digest again
    assert _stamped(data, stamp)[0] == text
    (data / "sub/b.bin").rename(data / "sub/c.bin")  # names count too
    assert _stamped(data, stamp)[0] not in (text, changed)
    # a file stands for itself: its name and bytes
    single = _folder(tmp_path / "ckpt", {"model.pt": b"weights"}) / "model.pt"
    assert input_digest.digest(single, tmp_path / "c.json") == input_digest.digest(
        tmp_path / "ckpt", tmp_path / "d.json")


def test_planning_reads_again_only_the_files_that_changed(tmp_path, monkeypatch):
    data = _folder(tmp_path / "data", {f"{i}.bin": bytes([i]) * 100 for i in range(5)})
    cache = tmp_path / "data.files.json"
    read = []
    real = input_digest._hash
    monkeypatch.setattr(input_digest, "_hash", lambda path: read.append(path.name) or real(path))
    first = input_digest.digest(data, cache)
    assert len(read) == 5
    # files changed within the file system's timestamp granularity are not cached
    read.clear()
    assert input_digest.digest(data, cache) == first and len(read) == 5
    monkeypatch.setattr(input_digest, "RACY_NS", 0)
    input_digest.digest(data, cache)
    read.clear()
    assert input_digest.digest(data, cache) == first and read == []
    # rewritten in place, same size, its mtime put back: its ctime tells
    time.sleep(0.05)
    before = os.stat(data / "3.bin")
    (data / "3.bin").write_bytes(b"x" * 100)
    os.utime(data / "3.bin", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(data / "3.bin").st_mtime_ns == before.st_mtime_ns
    assert input_digest.digest(data, cache) != first and read == ["3.bin"]


def test_absurd_or_missing_inputs_are_refused_naming_them(tmp_path, monkeypatch):
    monkeypatch.setattr(input_digest, "MAX_FILES", 3)
    many = _folder(tmp_path / "many", {f"{i}": b"" for i in range(4)})
    with pytest.raises(input_digest.InputError,
                       match=f"data.path '{many}' holds more than 3 files"):
        input_digest.digest(many, tmp_path / "c.json", "data.path")
    with pytest.raises(input_digest.InputError,
                       match=f"weights.checkpoint '{tmp_path / 'none.pt'}' does not exist"):
        input_digest.stamp(tmp_path / "none.pt", tmp_path / "s.sha256", "weights.checkpoint")
    # a link back up is walked once; a fifo is not read
    loop = _folder(tmp_path / "loop", {"a": b"1"})
    (loop / "up").symlink_to(loop)
    os.mkfifo(loop / "pipe")
    assert input_digest.digest(loop, tmp_path / "l.json") == input_digest.digest(
        _folder(tmp_path / "plain", {"a": b"1"}), tmp_path / "p.json")
