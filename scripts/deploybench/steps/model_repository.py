"""The Triton model repository of a configuration, for the server the config names."""

from __future__ import annotations

from pathlib import Path

from .. import artifacts
from ..tables import require_passed
from ..triton import install
from ..triton import repository as triton_repository


def model_repository(spec: dict, converted: Path, conversion_check: Path, out: Path) -> None:
    require_passed(conversion_check)
    backends = install.for_server(spec["server"]).backends
    config = triton_repository.config_path(out, spec["key"]["model"])
    served = artifacts.repository(spec, converted, config, backends)
    print(f"served by Triton's {served} backend")
