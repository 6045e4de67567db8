"""The user's checkpoint and dataset identified by their content
(deploybench.settings.input_digest): the stamp a rule takes moves exactly when the content
changed, whatever the files' mtimes, and planning reads again only the files whose (inode,
size, mtime, ctime) changed."""

import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, corrupt_tensor_bytes, planned_jobs, snakemake, tiny_models
from deploybench.settings import input_digest


def _folder(path, files: dict[str, bytes]):
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path


def _stamped(root, stamp):
    path = input_digest.stamp(root, stamp)
    return path.read_text(), path.stat().st_mtime_ns


def _set_back(path):
    old = time.time_ns() - 86_400 * 10**9
    os.utime(path, ns=(old, old))


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


@pytest.mark.e2e  # the real Snakemake
def test_a_missing_checkpoint_and_dataset_are_named_by_a_dry_run(tmp_path):
    """Both named at once, before any job, in a dry run as in a real one (`deploybench
    plan`): a dry run used to plan around them (naming, at most, the first one met)."""
    checkpoint, data = tmp_path / "gone" / "checkpoint.pt", tmp_path / "gone" / "electricity"
    work = tmp_path / "work"
    work.mkdir()
    result = snakemake(work, "-n", "--config", tiny_models(
        tmp_path, weights={"checkpoint": str(checkpoint)}, data={"path": str(data)}),
        check=False)
    assert result.returncode != 0
    assert (f"model 'tft-tiny': weights.checkpoint '{checkpoint}' and data.path '{data}' do "
            "not exist") in result.stdout + result.stderr, result.stdout + result.stderr
    assert not planned_jobs(result)


def _set_back(path: Path, days: float = 1) -> None:
    """The mtime `tar x`, `cp -p` or `rsync -a` leave: the original's, before the build."""
    old = time.time_ns() - int(days * 86_400e9)
    os.utime(path, ns=(old, old))


@pytest.mark.e2e
def test_a_replaced_checkpoint_or_data_file_reruns_what_read_it_whatever_its_mtime(tmp_path):
    """The user's checkpoint and dataset are inputs by their content (their stamps,
    deploybench.settings.input_digest): a file replaced with other bytes and an older mtime, or a
    swapped data folder, re-runs what read it; a touch re-runs nothing; a checkpoint whose
    tensor bytes are damaged is refused, naming it; a folder of far too many files is
    refused before any job, naming it."""
    import torch

    from deploybench.models import tft

    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    data, other = tmp_path / "data", tmp_path / "other"
    tft.generate_dataset(model["hparams"], str(data), **model["data"]["generate"])
    tft.generate_dataset(model["hparams"], str(other), **{**model["data"]["generate"],
                                                           "seed": 9})
    checkpoint, retrained = tmp_path / "checkpoint.pt", tmp_path / "retrained.pt"
    for path, seed in ((checkpoint, 4), (retrained, 5)):
        torch.save({"model": tft.build_model(model["hparams"], None, seed).model.state_dict()},
                   path)
    models = tiny_models(tmp_path, data={"path": str(data)},
                          weights={"checkpoint": str(checkpoint)})
    work = tmp_path / "work"
    work.mkdir()
    target = "results/tft-tiny/source/eval.npz"

    def plan() -> dict[str, int]:
        return planned_jobs(snakemake(work, "-n", target, "--config", models))

    snakemake(work, target, "--config", models)
    evaluated = (work / target).read_bytes()
    # touched, the same bytes: nothing to do
    os.utime(checkpoint)
    os.utime(data / "test.bin")
    assert plan() == {}
    # other bytes, an older mtime (as `cp -p other/test.bin data/` leaves it)
    shutil.copy2(other / "test.bin", data / "test.bin")
    _set_back(data / "test.bin")
    assert plan() == {"eval_set": 1}
    shutil.copy2(retrained, checkpoint)
    _set_back(checkpoint)
    assert plan() == {"weights": 1, "eval_set": 1}
    snakemake(work, target, "--config", models)
    assert (work / target).read_bytes() != evaluated
    assert plan() == {}
    # a swapped data folder, its files as old as ever
    data.rename(tmp_path / "data.old")
    other.rename(data)
    assert plan() == {"eval_set": 1}
    # damaged tensor bytes (size unchanged, an older mtime): refused, naming the file
    corrupt_tensor_bytes(checkpoint)
    _set_back(checkpoint)
    result = snakemake(work, target, "--config", models, check=False)
    assert result.returncode != 0
    log = (work / "results/tft-tiny/source/logs/weights.log").read_text()
    assert re.search(rf"TFT checkpoint '{re.escape(str(checkpoint))}' is corrupt: its entry "
                     r"'retrained/data/\d+' fails the zip CRC check", log), log
    # a data.path of far too many files (`data.path: /usr`): refused while planning (the
    # bound lowered to 3 in snakemake's process, as 10,000 files take a while to make)
    many = tmp_path / "many"
    many.mkdir()
    for i in range(4):
        (many / str(i)).touch()
    result = snakemake(work, "-n", target, "--config", tiny_models(
        tmp_path, data={"path": str(many)}), check=False,
        prelude="from deploybench.settings import input_digest\ninput_digest.MAX_FILES = 3")
    assert result.returncode != 0
    assert (f"model 'tft-tiny': data.path '{many}' holds more than 3 files: a checkpoint "
            "or a dataset folder is expected") in result.stdout + result.stderr
