"""The tiny TFT's hparams and a YAML alias bomb, as the security tests use them."""

from pathlib import Path

import yaml

from testkit.workflow import ROOT

TFT_TINY = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())["hparams"]


def alias_bomb(path: Path, key: str = "targets", levels: int = 10) -> Path:
    """Billion laughs (600 bytes at ten levels): anchors, each ten aliases of the one
    before (10^levels strings expanded), under `key`, which validation walks."""
    lines = [f"{key}:", "  - &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    path.write_text("\n".join(lines) + "\n")
    return path
