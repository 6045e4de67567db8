"""Which devices this machine has, and whether a GPU key may run here."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache

from ..backends import BACKENDS, is_ensemble
from ..runners import RUNNERS


class DeviceMismatch(RuntimeError):
    """The GPU key of a target does not match this machine."""


# Steps that run on the keyed device (and check it is there); the others run anywhere.
DEVICE_STEPS = ("conversion_check", "native", "accuracy", "offline", "online", "floor")


def may_run_on_device(step: str) -> bool:
    """Whether `step` runs on the keyed device for some run (see runs_on_device)."""
    return step in DEVICE_STEPS or step == "convert"


def runs_on_device(run: dict, step: str) -> bool:
    """Whether `step` of a run needs the run's device: the steps above, and a conversion
    that builds a TensorRT engine or casts to FP16 (on the device)."""
    if step == "convert":
        runner = (BACKENDS[run["backend"]["dense"]].runner  # an ensemble converts its dense part
                  if is_ensemble(run) else run["backend"]["runner"])
        return RUNNERS[runner].builds_on_device or run["precision"] != "fp32"
    return step in DEVICE_STEPS


def query_gpus(fields: str) -> list[list[str]]:
    """nvidia-smi's answer for `fields` (e.g. "name,driver_version"), one list per GPU;
    empty on a machine without NVIDIA GPUs."""
    if not shutil.which("nvidia-smi"):
        return []
    result = subprocess.run(
        ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        return []
    return [line.split(", ") for line in result.stdout.splitlines() if line.strip()]


@lru_cache(maxsize=1)
def gpu_names() -> tuple[str, ...]:
    """Names of the NVIDIA GPUs visible here (empty on a CPU-only machine)."""
    return tuple(row[0].strip() for row in query_gpus("name"))


def measured_device(checked: dict) -> str:
    """The device a measurement runs on, as `check` found it: the host's CPUs for the cpu
    key and for a CPU node standing in for a GPU key; else the GPU the job sees first
    (CUDA_VISIBLE_DEVICES, an index or a UUID), by its UUID."""
    if not checked["devices"]:
        return "cpu"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.startswith(("GPU-", "MIG-")):
        return visible
    index = visible if visible.isdigit() else "0"
    uuids = {row[0].strip(): row[1].strip() for row in query_gpus("index,uuid") if len(row) == 2}
    return uuids.get(index, f"gpu-{index}")


def check(gpu: dict, allow_mismatch: bool) -> dict:
    """Refuse a GPU key this machine does not have; return what was found (provenance)."""
    names = gpu_names()
    found = {"gpu_key": gpu["key"], "devices": list(names), "mismatch_allowed": False}
    if gpu["kind"] == "cpu":
        return found
    if any(m in name for name in names for m in gpu["match"]):
        return found
    if allow_mismatch:
        found["mismatch_allowed"] = True
        return found
    have = ", ".join(names) if names else "no NVIDIA GPU (CPU only)"
    raise DeviceMismatch(
        f"GPU key '{gpu['key']}' needs a device whose name contains "
        f"{' or '.join(repr(m) for m in gpu['match'])}; this machine has: {have}. "
        "Build it on such a machine, or set allow_gpu_mismatch: true to override "
        "(recorded in the results)."
    )
