"""Convert an exported FP32 model to the backend and precision of a configuration."""

from __future__ import annotations

from pathlib import Path

from .. import artifacts
from ..measurement import device


def convert(spec: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    """`out`: the exported model converted for the run; for an ensemble (hps-*), the
    dense export converted beside the sparse storage exported in `sparse`."""
    if device.runs_on_device(spec, "convert"):
        device.check(spec["gpu"], spec["allow_gpu_mismatch"])
    artifacts.of(spec).convert(spec, exported, out, sparse)
