"""The Triton model repository of a configuration, for the server the config names."""

from __future__ import annotations

from pathlib import Path

from .. import artifacts
from ..records.tables import require_passed
from ..settings import deployments
from ..triton import cpp_backend, install
from ..triton import repository as triton_repository


def model_repository(spec: dict, converted: Path, out: Path,
                     conversion_check: Path | list = ()) -> None:
    """`converted`: the converted model (its check passed), or a user's repository's
    export, served as it is (no conversion, no check: an empty list)."""
    if conversion_check:
        require_passed(conversion_check)
    server = install.for_server(spec["server"])
    served = artifacts.of(spec).repository(spec, converted, out, server.backends)
    print(f"served by Triton's {served} backend")
    if served != cpp_backend.NAME and triton_repository.cpp_serves(spec):
        why = (server.cpp_backend if cpp_backend.NAME not in server.backends
               else f"server.serve_with: {spec['server']['serve_with']}")
        print(f"not by the pipeline's C++ backend ({why})")
    for deployment in deployments.of(spec):
        print(f"deployment: model '{deployment.name}', max batch size "
              f"{deployment.max_batch_size}")
