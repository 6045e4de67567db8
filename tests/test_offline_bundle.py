"""onnxruntime-gpu's bundle in parts (scripts/pack_offline.py --part-mib), carried to an
offline GPU machine over several calls and joined there by scripts/offline_env.sh."""

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from pack_offline import split  # noqa: E402

BUNDLE = "onnxruntime-gpu-py3.12.tar.xz"


def _source(pack: Path, dest: Path) -> subprocess.CompletedProcess:
    """offline_env.sh sourced as the lent-machine scripts source it, the first bundle
    already unpacked in `dest`; prints the paths it set."""
    script = (f'. "{ROOT}/scripts/offline_env.sh" "{pack}/offline-py3.12.tar.xz" && '
              'echo "PYTHONPATH=$PYTHONPATH"')
    env = {**os.environ, "DEPLOYBENCH_OFFLINE_DIR": str(dest), "PYTHONPATH": ""}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


def test_the_parts_are_kept_as_they_come_and_joined_once_all_have(tmp_path):
    """A lent machine's copy of the tree holds only the latest call's carried part
    (2026-11-28): each part that matches its sum is kept on the machine until all are."""
    pack, dest = tmp_path / "pack", tmp_path / "offline"
    pack.mkdir()
    (dest / "site").mkdir(parents=True)  # the first bundle, as if unpacked
    marker = os.urandom(50_000)  # incompressible: several parts
    with tarfile.open(pack / BUNDLE, "w:xz") as tar:
        info = tarfile.TarInfo("onnxruntime-gpu/onnxruntime/marker.bin")
        info.size = len(marker)
        tar.addfile(info, io.BytesIO(marker))
    parts = split(pack / BUNDLE, 20_000)
    assert len(parts) == 3 and sum(p.stat().st_size for p in parts) == \
        (pack / BUNDLE).stat().st_size
    sums = (pack / f"{BUNDLE}.sha256").read_text().splitlines()
    assert [line.split()[1] for line in sums] == [*(p.name for p in parts), BUNDLE]
    (pack / BUNDLE).unlink()  # the machine has only what was carried
    held = {p.name: p.read_bytes() for p in parts}

    def carry(name: str, data: bytes) -> subprocess.CompletedProcess:
        """One call: its copy of the tree has this part alone, and the sums."""
        for part in pack.glob(f"{BUNDLE}.part*"):
            part.unlink()
        (pack / name).write_bytes(data)
        return _source(pack, dest)

    first, second, last = (p.name for p in parts)
    assert "1 of 3 parts" in carry(first, held[first]).stderr
    damaged = held[second][:-1] + bytes([held[second][-1] ^ 1])
    done = carry(second, damaged)  # arrived damaged: not kept
    assert f"{second} does not match its sum" in done.stderr, done.stderr
    assert "1 of 3 parts" in done.stderr, done.stderr
    assert "2 of 3 parts" in carry(second, held[second]).stderr
    assert not (dest / "onnxruntime-gpu").exists()

    done = carry(last, held[last])
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert (dest / "onnxruntime-gpu/onnxruntime/marker.bin").read_bytes() == marker
    assert done.stdout.startswith(f"PYTHONPATH={dest}/onnxruntime-gpu:{dest}/site:"), \
        done.stdout
    assert not list(dest.glob("*/*.part*")) and not (dest / ".ort").exists()
    assert "parts" not in _source(pack, dest).stderr  # later calls: unpacked, nothing to do
