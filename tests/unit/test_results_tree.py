"""What of results/ lives in git: the tracked tree stays small, the sets' logs and history
copies only in their archives (scripts/results_tools/results_archive.py), which pack the
same bytes again and unpack nothing that could do harm."""

import io
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import results_archive as ra

from deploybench.records import atomic
from testkit.workflow import ROOT

# the tree travels to a lent GPU machine with each call, beside the 40.6 MiB offline bundle
# or a 50 MiB part of onnxruntime-gpu's or tensorflow-cpu's (as `.pack` holds them since
# 2026-12-07), within the 64 MiB a call carries: 13 leaves a MiB to spare (12.3 with the
# H100 sets of 2026-12-07)
MAX_TRACKED_MIB = 13


def tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no git checkout to list: {e}")
    return [name for name in out.split("\0") if name]


def test_the_tracked_tree_is_small_and_holds_no_logs_or_history_copies():
    files = tracked()
    size = sum((ROOT / name).stat().st_size for name in files if (ROOT / name).is_file())
    assert size < MAX_TRACKED_MIB * 2**20, f"tracked files: {size / 2**20:.2f} MiB"
    loose = [name for name in files if name.startswith("results/")
             and ra.is_kept("/".join(name.split("/")[3:]))]
    assert not loose, \
        f"pack them (python scripts/results_tools/results_archive.py pack): {loose[:5]}"


# What is not a result: a probe's script (its outputs go with it, under docs/probes/) or a
# served scenario's scratch model repository (deploybench.serving.scratch_folder)
NOT_RESULTS = re.compile(r"(^|/)\.scenario-[^/]*/|\.(sh|py|ipynb)$")


def not_results(names: list[str]) -> list[str]:
    return [name for name in names if name.startswith("results/") and NOT_RESULTS.search(name)]


def test_results_hold_no_probe_scripts_or_scratch_folders():
    assert not not_results(tracked()), "probes go to docs/probes/, scratch is never committed"


@pytest.mark.parametrize("name, stray", [
    ("results/tft/h100/aoti-2026-11-24/aoti_probe.py", True),
    ("results/tft/h100/aoti-2026-11-24/load_probe.sh", True),
    ("results/dcnv2/h200/set-2026-11-28/hps-onnx_fp32/.scenario-4zagxdl8/repository/m/config.pbtxt",
     True),
    ("results/dcnv2/h200/set-2026-11-28/hps-onnx_fp32/offline.json", False),
    ("results/tft/h100/aoti-2026-11-24/gpu.txt", False),
    ("docs/probes/tft-aoti-2026-11-24/aoti_probe.py", False),
])
def test_a_planted_probe_or_scratch_folder_fails_the_tree(name, stray):
    assert not_results([*tracked(), name]) == ([name] if stray else [])


def test_git_ignores_a_scenarios_scratch_folder():
    scratch = "results/m/h100/a_fp32/.scenario-123-x4/repository/m/config.pbtxt"
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index",
                              scratch], check=False).returncode
    assert ignored == 0, f"{scratch} is not ignored: .gitignore lacks .scenario-*"


def _set(folder):
    """A results/<model>/<gpu>/ folder: a set with logs, history, a stray log, a table."""
    for name, text in {"a_fp32/logs/offline.log": "run\n", "a_fp32/offline.csv": "x\n1\n",
                       "a_fp32/history/offline-20261101T000000Z.csv": "x\n1\n",
                       "set-2026-11-26/snakemake.log": "done\n", "set-2026-11-26/NOTES.md": "n"
                       }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_packing_again_gives_the_same_bytes_and_unpacking_lays_the_files_out(tmp_path):
    folder = tmp_path / "results/m/cpu"
    _set(folder)
    assert ra.members(folder) == ["a_fp32/history/offline-20261101T000000Z.csv",
                                  "a_fp32/logs/offline.log", "set-2026-11-26/snakemake.log"]
    ra.pack(folder)
    first = (folder / ra.ARCHIVE).read_bytes()
    os.utime(folder / "a_fp32/logs/offline.log", (0, 0))  # a fresh checkout's times
    (folder / "a_fp32/logs/offline.log").chmod(0o600)
    assert "unchanged" in ra.pack(folder)
    assert (folder / ra.ARCHIVE).read_bytes() == first
    assert ra.folders(tmp_path / "results", unpacking=False) == [folder]

    (folder / "a_fp32/logs/offline.log").unlink()
    (folder / "set-2026-11-26/snakemake.log").write_text("mine\n")
    lines = ra.unpack(folder)
    assert (folder / "a_fp32/logs/offline.log").read_text() == "run\n"
    assert (folder / "set-2026-11-26/snakemake.log").read_text() == "mine\n"  # kept, said
    assert any(line.startswith("kept") and "snakemake.log" in line for line in lines)
    assert lines[-1].endswith("1 files written, 1 already there, 1 kept")
    ra.unpack(folder, force=True)
    assert (folder / "set-2026-11-26/snakemake.log").read_text() == "done\n"


def test_packing_a_checkout_that_never_unpacked_keeps_what_the_archive_held(tmp_path):
    """A fresh clone has the archive, not its files: a new set packed there is added to
    what the archive held, never put in its place."""
    folder = tmp_path / "results/m/cpu"
    _set(folder)
    ra.pack(folder)
    held = ra.archived(folder / ra.ARCHIVE)
    for name in held:  # as a fresh clone has it
        (folder / name).unlink()
    new = folder / "b_fp16/logs/online.log"
    new.parent.mkdir(parents=True)
    new.write_text("new\n")
    assert "4 files" in ra.pack(folder)
    assert ra.archived(folder / ra.ARCHIVE) == {**held, "b_fp16/logs/online.log": b"new\n"}


def test_packing_exactly_drops_what_a_replaced_set_no_longer_holds(tmp_path):
    """A configuration measured again: its old logs and history copies, unpacked and
    removed with it, leave the archive with --exact (a plain pack would keep them beside
    the new set's), and the output names them."""
    folder = tmp_path / "results/m/cpu"
    _set(folder)
    ra.pack(folder)
    for name in ("a_fp32/logs/offline.log", "a_fp32/history/offline-20261101T000000Z.csv"):
        (folder / name).unlink()
    (folder / "a_fp32/logs/native.log").write_text("again\n")
    assert "dropped" not in ra.pack(folder)  # without --exact: kept
    assert len(ra.archived(folder / ra.ARCHIVE)) == 4
    line = ra.pack(folder, exact=True)
    assert line.endswith("dropped 2: a_fp32/history/offline-20261101T000000Z.csv, "
                         "a_fp32/logs/offline.log"), line
    assert ra.archived(folder / ra.ARCHIVE) == {"a_fp32/logs/native.log": b"again\n",
                                                "set-2026-11-26/snakemake.log": b"done\n"}
    # a checkout that never unpacked it: --exact would drop everything, so it is refused
    # and the archive kept
    kept = (folder / ra.ARCHIVE).read_bytes()
    for name in ra.members(folder):
        (folder / name).unlink()
    (folder / "b_fp16/logs/online.log").parent.mkdir(parents=True)
    (folder / "b_fp16/logs/online.log").write_text("new\n")
    with pytest.raises(ra.Refused, match="unpack it first"):
        ra.pack(folder, exact=True)
    assert (folder / ra.ARCHIVE).read_bytes() == kept
    assert ra.main(["pack", str(folder), "--exact"]) == 1


def _archive(folder, *entries):
    """An archive of hand-made members: (name, type, link target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, kind, target in entries:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            info.size = 2 if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(b"x\n") if kind == tarfile.REGTYPE else None)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ra.ARCHIVE).write_bytes(buffer.getvalue())


@pytest.mark.parametrize("name, kind, target", [
    ("/etc/x/logs/a.log", tarfile.REGTYPE, ""),
    ("a/../../logs/a.log", tarfile.REGTYPE, ""),
    ("a_fp32/offline.csv", tarfile.REGTYPE, ""),  # a table: not the archive's to write
    ("a_fp32/logs/a.log", tarfile.SYMTYPE, "/etc/passwd"),
    ("a_fp32/logs/b.log", tarfile.LNKTYPE, "a_fp32/logs/a.log"),
    ("a_fp32/logs/dev.log", tarfile.CHRTYPE, ""),
])
def test_unpack_refuses_an_archive_with_a_harmful_member(tmp_path, name, kind, target):
    folder = tmp_path / "results/m/cpu"
    _archive(folder, ("a_fp32/logs/fine.log", tarfile.REGTYPE, ""), (name, kind, target))
    with pytest.raises(ra.Refused, match="refused, nothing unpacked"):
        ra.unpack(folder)
    left = sorted(p.name for p in tmp_path.rglob("*"))
    assert left == sorted([ra.ARCHIVE, "cpu", "m", "results"])
    assert ra.main(["unpack", str(folder)]) == 1


def test_unpack_passes_over_folder_entries(tmp_path):
    """An archive made by hand (`tar cJf`) lists folders too: harmless, passed over."""
    folder = tmp_path / "results/m/cpu"
    _archive(folder, ("a_fp32", tarfile.DIRTYPE, ""), ("a_fp32/logs", tarfile.DIRTYPE, ""),
             ("a_fp32/logs/a.log", tarfile.REGTYPE, ""))
    assert ra.unpack(folder)[-1].endswith("1 files written, 0 already there, 0 kept")
    assert (folder / "a_fp32/logs/a.log").read_text() == "x\n"


def test_unpack_writes_nothing_through_a_link_on_disk(tmp_path):
    folder, elsewhere = tmp_path / "results/m/cpu", tmp_path / "elsewhere"
    _archive(folder, ("a_fp32/logs/a.log", tarfile.REGTYPE, ""))
    elsewhere.mkdir()
    (folder / "a_fp32").mkdir()
    (folder / "a_fp32/logs").symlink_to(elsewhere)
    with pytest.raises(ra.Refused, match="through the link"):
        ra.unpack(folder)
    assert not list(elsewhere.iterdir())


def test_plots_are_palette_pngs_and_results_json_compact(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    atomic.write_png(fig, tmp_path / "plot.png", dpi=50)
    plt.close(fig)
    with Image.open(tmp_path / "plot.png") as image:
        assert image.mode == "P" and len(image.getcolors()) <= atomic.PNG_COLOURS
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]
    data = {"a": [1, 2.5], "b": {"c": None}}
    assert atomic.json_text(data) == '{"a":[1,2.5],"b":{"c":null}}'
    assert json.loads(atomic.json_text(data)) == data


def test_a_scenarios_scratch_is_removed_however_its_step_ends(tmp_path):
    """The scratch repository goes when the server stops, on success and on failure; one a
    killed step left (its process gone) goes with the next scenario served there, a live
    step's stays."""
    from deploybench.serving import scratch_folder

    with subprocess.Popen(["true"]) as ended:  # a pid that has ended
        ended.wait()
    stale = tmp_path / f".scenario-{ended.pid}-x1/repository"
    live = tmp_path / f".scenario-{os.getpid()}-x2/repository"
    for folder in (stale, live):
        folder.mkdir(parents=True)
    with pytest.raises(RuntimeError), scratch_folder(tmp_path) as scratch:
        assert not stale.parent.exists() and live.exists()
        (Path(scratch) / "repository").mkdir()
        raise RuntimeError("the server failed")
    assert not Path(scratch).exists() and live.exists()
    with scratch_folder(tmp_path) as scratch:
        pass
    assert not Path(scratch).exists()
