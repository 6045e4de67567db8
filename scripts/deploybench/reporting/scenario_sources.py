"""Where a configuration folder's scenarios were measured: on one device of one machine by
one version of the code, or apart (a folder put together from runs on several machines,
scripts/results_tools/assemble_configuration.py), which its figures beside one another do
not show unless said: the headlines and the model table say it."""

from __future__ import annotations

import json
from pathlib import Path

from ..records import formats

# The scenarios whose figures a headline puts side by side
SCENARIOS = ("offline", "online", "rate")


def _where(provenance: dict) -> dict:
    """What tells one measuring machine and run from another: the device, the machine (its
    GPUs, or its CPU, and cores) and the code."""
    gpus = provenance.get("gpus") or []
    return {"device": provenance.get("device"),
            "machine": tuple(sorted(g.get("uuid", g["name"]) for g in gpus))
            or provenance.get("cpu"),
            "cpus": provenance.get("cpus"),
            "code": (provenance.get("project") or {}).get("code")}


def _said(where: dict) -> str:
    """A scenario's device (a GPU by the start of its UUID), host and code."""
    device = where["device"] or "the CPU"
    device = "-".join(device.split("-")[:2]) if device.startswith("GPU-") else device
    cores = f"a {where['cpus']}-core host" if where["cpus"] else "a host"
    return device + f" of {cores}" + (f", code {where['code'][:8]}" if where["code"] else "")


def measured_apart(folder: Path) -> str | None:
    """None where the folder's scenarios (SCENARIOS) ran on one device of one machine with
    one version of the code; else each scenario's device, host and code, in words."""
    found = {}
    for scenario in SCENARIOS:
        path = Path(folder) / f"{scenario}.json"
        if path.is_file():
            found[scenario] = _where(formats.read(path).get("provenance", {}))
    if len({json.dumps(w, sort_keys=True) for w in found.values()}) < 2:
        return None
    count = {what: len({json.dumps(w[what]) for w in found.values()})
             for what in ("device", "machine", "code")}
    apart = (f"{count['device']} devices of {_number(count['machine'], 'machine')}, "
             f"{_number(count['code'], 'version')} of the code")
    return (f"{' and '.join(found)} measured apart ({apart}): "
            + "; ".join(f"{scenario} on {_said(where)}" for scenario, where in found.items()))


def _number(n: int, noun: str) -> str:
    return f"one {noun}" if n == 1 else f"{n} {noun}s"
