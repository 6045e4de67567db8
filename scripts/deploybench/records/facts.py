"""What a measurement recorded, read back as the reports and the regression reports read
it: whether a level ran under contention (measurement.host_load recorded it), and whether
two measurements ran on one device (measurement.provenance recorded where)."""

from __future__ import annotations

# Other processes' CPU over a measurement, in cores per CPU the step may run on, from which
# it is flagged: 0.25 of a core on a 2-CPU host, where an overlapping idle server took 0.41
# and quiet levels read at most 0.14 (76 committed); 2 cores on a 16-CPU GPU host, where
# quiet online sweeps read 0.3-0.45 (loopback interrupts, kernel threads: outside the
# step's tree; an overlapping server there shows on its GPU).
CONTENDED_SHARE = 1 / 8


def of_level(entry: dict, level: dict) -> bool:
    """Whether a JSON's per-level entry (host_load, repeats) is of `level` (column ->
    value; 4 and 4.0 alike)."""
    return all(_value(entry.get(k)) == _value(v) for k, v in level.items())


def _value(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def contended(report: dict, level: dict) -> bool:
    """Whether a step's JSON records `level` as measured under contention: native records
    one host load for its whole run, the other scenarios one a level."""
    load = report.get("host_load")
    if isinstance(load, dict):
        return bool(load.get("contended"))
    return any(of_level(entry, level) and entry.get("contended") for entry in load or [])


class DifferentDevices(ValueError):
    """Two measurements to be compared were made on different devices."""


def same_device(a: dict, b: dict) -> str | None:
    """None when two provenances were measured on one device (the host, the device the
    step used: a GPU's UUID or "cpu", the CPU model; fields both record), else what
    differs: served/native across two machines would compare the machines."""
    differ = [f"{k} {a[k]!r} against {b[k]!r}" for k in ("host", "device", "cpu")
              if a.get(k) is not None and b.get(k) is not None and a[k] != b[k]]
    return "measured on different devices: " + "; ".join(differ) if differ else None
