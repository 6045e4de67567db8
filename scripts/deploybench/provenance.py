"""What a measurement ran on: versions, devices, configuration hash, date."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import platform

from .device import query_gpus


def config_hash(run: dict) -> str:
    return hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()[:16]


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvidia_smi() -> dict:
    gpus = query_gpus("name,driver_version,memory.total")
    if not gpus:
        return {}
    return {"gpus": [{"name": g[0], "driver": g[1], "memory": g[2]} for g in gpus if len(g) == 3]}


def collect(run: dict, server_metadata: dict | None = None, device_check: dict | None = None,
            server: dict | None = None) -> dict:
    """What a measurement ran on; `server`: the Triton install and who served the model."""
    info = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "config_hash": config_hash(run),
        "key": run["key"],
        "packages": {p: _version(p) for p in
                     ("torch", "onnxruntime", "onnx", "tritonclient", "nvidia-pytriton",
                      "snakemake", "numpy")},
        **_nvidia_smi(),
    }
    try:
        import torch

        info["cuda"] = torch.version.cuda
    except ImportError:
        pass
    if server_metadata:
        info["triton"] = {"name": server_metadata.get("name"),
                          "version": server_metadata.get("version")}
        # perf_analyzer ships in the tritonclient wheel and reports no version of its own.
        info["perf_analyzer"] = f"tritonclient {_version('tritonclient')} wheel"
    if device_check:
        info["device_check"] = device_check
    if server:
        info["server"] = server
    return info
