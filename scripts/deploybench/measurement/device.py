"""Which devices this machine has, and whether a GPU key may run here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from ..settings.deployments import gpu_count
from ..settings.run_facts import runs_on_device
from . import locks


class DeviceMismatch(RuntimeError):
    """The GPU key of a target does not match this machine."""


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


def listed_gpus() -> list[dict]:
    """Every NVIDIA GPU of the host and MIG device, as `nvidia-smi -L` lists them:
    {"index", "uuid", "name"} (a MIG device: its GPU's index and name)."""
    if not shutil.which("nvidia-smi"):
        return []
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    found, gpu = [], None
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        listed = re.match(r"\s*(GPU (\d+): (.*?)|MIG .*?) \(UUID: ((?:GPU|MIG)-[^)]+)\)", line)
        if listed and listed.group(2) is not None:
            gpu = {"index": listed.group(2), "uuid": listed.group(4), "name": listed.group(3)}
            found.append(gpu)
        elif listed and gpu:
            found.append({**gpu, "uuid": listed.group(4)})
    return found


def visible_gpus() -> list[dict]:
    """The GPUs this process may use: those CUDA_VISIBLE_DEVICES names (by index or UUID:
    a scheduler's choice, or the one a step claimed), in its order; every GPU without it."""
    listed = listed_gpus()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [g for g in listed if g["uuid"].startswith("GPU-")]
    by_id = {g["uuid"]: g for g in listed} | {
        g["index"]: g for g in listed if g["uuid"].startswith("GPU-")}
    return [by_id[v] for v in (v.strip() for v in visible.split(",")) if v in by_id]


def gpu_names() -> tuple[str, ...]:
    """Names of the NVIDIA GPUs visible here (empty on a CPU-only machine)."""
    return tuple(g["name"] for g in visible_gpus())


def host_key(registry: dict) -> str:
    """The one GPU key of `registry` (config/gpus.yaml) whose `match` names every GPU of
    this host: what a lanes file's `{gpu}` stands for (scripts/machines/gpu_lanes.sh), so one file
    measures on whichever machine is lent."""
    names = sorted({g["name"] for g in listed_gpus() if g["uuid"].startswith("GPU-")})
    keys = [key for key, gpu in registry.items() if names and gpu["match"]
            and all(any(m in name for m in gpu["match"]) for name in names)]
    if len(keys) != 1:
        raise DeviceMismatch(
            f"no one GPU key of the registry matches this host's GPUs "
            f"({', '.join(names) or 'none'}): {', '.join(keys) or 'none'} do; add a key "
            f"to config/gpus.yaml, or name the key in the targets instead of {{gpu}}")
    return keys[0]


def measured_device(checked: dict) -> str:
    """The device a measurement runs on: the one its step claimed (`claim`); else, as
    `check` found it, the host's CPUs for the cpu key and for a CPU node standing in for
    a GPU key, or the first GPU visible, by its UUID."""
    if _claimed is not None:
        return _claimed.device
    gpus = visible_gpus()
    return gpus[0]["uuid"] if checked["devices"] and gpus else "cpu"


def check(gpu: dict, allow_mismatch: bool, gpus: list[dict]) -> dict:
    """Refuse a GPU key the visible `gpus` lack; return what was found (provenance)."""
    names = [g["name"] for g in gpus]
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


# Steps on the device that do not hold it: a conversion runs beside measurements (on the
# GPU of the key that is free now, where one is)
UNHELD = ("convert", "conversion_check")


@dataclass
class Claim:
    """The device a step runs on: what `check` found (provenance), the device ("cpu", or
    a GPU's UUID, which CUDA_VISIBLE_DEVICES now names alone; the first of `devices`, of
    a deployment over several) and its locks where held."""

    checked: dict
    device: str
    held: locks.Held | None
    devices: tuple = ()


_claimed: Claim | None = None  # this process's: one step, one claim


def deployment_gpus(run: dict) -> int:
    """The GPUs a run's deployment spans (triton.gpus, default 1)."""
    return gpu_count(run.get("model", {}).get("triton", {}))


def claims(run: dict, step: str) -> bool:
    """Whether `step` claims the run's device where it starts: a step on the device
    (runs_on_device; a rate sweep, a search's point), but not a measurement of a remote
    server, whose device is not here."""
    if not (runs_on_device(run, step) or step in ("rate", "search_point")):
        return False
    return step in UNHELD or run.get("server", {}).get("kind") != "remote"


def _choices(gpu: dict, checked: dict, gpus: list[dict]) -> list[str]:
    """The devices a step of the key may take, best first: the visible `gpus` whose name
    matches the key (any of them where a mismatch is allowed), else the CPUs."""
    if gpu["kind"] == "cpu":
        return ["cpu"]
    matching = [g["uuid"] for g in gpus if any(m in g["name"] for m in gpu["match"])]
    return matching or ([g["uuid"] for g in gpus] if checked["mismatch_allowed"] else []) \
        or ["cpu"]


@contextmanager
def claim(run: dict, hold: bool = True, count: int = 1):
    """The device of a step, checked once where the step starts: refuses a GPU key this
    machine lacks, takes the first matching GPU whose lock is free (waiting while every
    one is held; `count` of them for a deployment over several) and makes it the only one
    CUDA_VISIBLE_DEVICES shows to the step, its server and perf_analyzer. `hold` False (a
    conversion): the first free one, unheld. Within a claim (the step's), yields it."""
    global _claimed
    if _claimed is not None:
        yield _claimed
        return
    gpus = visible_gpus()  # one nvidia-smi listing for the check, the choice, the pinning
    checked = check(run["gpu"], run["allow_gpu_mismatch"], gpus)
    choices = _choices(run["gpu"], checked, gpus)
    if count > len(choices):
        raise DeviceMismatch(f"triton.gpus {count}: GPU key '{run['gpu']['key']}' has "
                             f"{len(choices)} GPU(s) this job may use ({', '.join(choices)})")
    with locks.any_device_lock(choices, count) if hold else nullcontext() as held:
        devices = tuple(held.record.get("devices", [held.record["device"]])) if held else (
            next((d for d in choices if locks.is_free(d)), choices[0]),)
        if devices[0] != "cpu":
            if hold:
                _pin_to_share(devices, [g["uuid"] for g in gpus])
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        _claimed = Claim(checked, devices[0], held, devices)
        try:
            yield _claimed
        finally:
            _claimed = None


def verify_held() -> None:
    """Before a step writes its result: raise where a lock it holds was removed or replaced
    meanwhile (locks.Held.verify: another run may have measured beside it)."""
    if _claimed is not None and _claimed.held is not None:
        _claimed.held.verify()


def _pin_to_share(devices: tuple, gpus: list[str]) -> None:
    """Pin this step (and so its server and perf_analyzer) to its GPUs' share of the CPUs
    it may use, the k-th of n GPUs the k-th n-th: measurements side by side then neither
    share a core nor count each other as load (host_load reads the pinned CPUs alone).
    `gpus`: the UUIDs of the GPUs the step may use, in order."""
    if len(gpus) < 2 or not set(devices) <= set(gpus) or len(devices) == len(gpus):
        return
    cpus, n, share = sorted(os.sched_getaffinity(0)), len(gpus), set()
    for k in (gpus.index(d) for d in devices):
        first = k * len(cpus) // n
        share.update(cpus[first:max((k + 1) * len(cpus) // n, first + 1)])
    os.sched_setaffinity(0, share)


SLOTS_ENV = "DEPLOYBENCH_BENCH_SLOTS"


def bench_slots() -> int:
    """How many measuring jobs a local run runs at once (the default profile's
    `bench_slot`): one a GPU of the host, at least one; DEPLOYBENCH_BENCH_SLOTS overrides."""
    text = os.environ.get(SLOTS_ENV)
    if text is None:
        return max(1, len(visible_gpus()))
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{SLOTS_ENV}={text!r}: give how many measuring jobs may run at "
                         "once, a whole number of at least 1 (default: one a GPU)")
    return int(text)
