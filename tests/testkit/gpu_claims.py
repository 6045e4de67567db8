"""A host of GPUs (nvidia-smi's listing) the claims see."""

import os

import pytest

from testkit.workflow import ROOT

UUIDS = ["GPU-00000000-aaaa-0000-0000-000000000000", "GPU-11111111-bbbb-0000-0000-000000000000",
         "GPU-22222222-cccc-0000-0000-000000000000"]
LISTING = (f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {UUIDS[0]})\n"
           f"GPU 1: NVIDIA A100-SXM4-80GB (UUID: {UUIDS[1]})\n"
           f"GPU 2: NVIDIA H100 80GB HBM3 (UUID: {UUIDS[2]})\n")


@pytest.fixture
def host(tmp_path, monkeypatch):
    """Environment of a process on the stand-in host: its nvidia-smi, a lock folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && printf '{LISTING}' && exit 0\nexit 9\n")
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT / "scripts"), "DEPLOYBENCH_LOCK_DIR": str(tmp_path / "locks"),
           "DEPLOYBENCH_LOCK_TIMEOUT_S": "60"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env
