"""Convert an exported FP32 model to the backend and precision of a configuration."""

from __future__ import annotations

from pathlib import Path

from .. import artifacts


def convert(spec: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    """`out`: the exported model converted for the run; for an ensemble (hps-*), the
    dense export converted beside the sparse storage exported in `sparse`."""
    artifacts.of(spec).convert(spec, exported, out, sparse)
