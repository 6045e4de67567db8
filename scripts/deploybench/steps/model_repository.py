"""The Triton model repository of a configuration, for the server the config names."""

from __future__ import annotations

from pathlib import Path

from .. import artifacts, deployments
from ..tables import require_passed
from ..triton import install


def model_repository(spec: dict, converted: Path, conversion_check: Path, out: Path) -> None:
    require_passed(conversion_check)
    backends = install.for_server(spec["server"]).backends
    served = artifacts.repository(spec, converted, out, backends)
    print(f"served by Triton's {served} backend")
    for deployment in deployments.of(spec):
        print(f"deployment: model '{deployment.name}', max batch size "
              f"{deployment.max_batch_size}")
