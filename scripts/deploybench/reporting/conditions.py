"""The conditions each measurement of a configuration ran under, as its README says them:
the levels that did not stabilise, the repeats' noise, what else loaded the host and the
GPU, and the serving processes' and the GPU's telemetry (what the steps recorded in the
scenario JSONs and the tables' telemetry columns)."""

from __future__ import annotations

import pandas as pd

from ..records.facts import CONTENDED_SHARE
from ..records.tables import SHARED_MEMORY, STABLE, TELEMETRY_COLUMNS, WINDOW_SPREAD
from .markdown import markdown_table


def unstable_note(table: pd.DataFrame, perf: dict) -> str:
    """A warning above a table with rows that did not stabilise (perf.on_unstable:
    record): how many, and what their figures are worth."""
    unstable = table[~table[STABLE].astype(bool)]
    if unstable.empty:
        return ""
    return (f"**{len(unstable)} of {len(table)} levels did not stabilise** (`Stable` false): "
            f"perf_analyzer's last windows never agreed within "
            f"{perf['stability_percentage']} % in {perf['attempts']} attempts, so each was "
            "measured once more and kept; its `window spread (%)` (up to "
            f"{unstable[WINDOW_SPREAD].max():g} %) bounds what its figures are worth.\n\n")


def noise_section(offline: dict, online: dict) -> str:
    """With perf.repeats: each level's runs, their median's interval and spread."""
    rows = [{"Scenario": scenario, **row}
            for scenario, report in (("offline", offline), ("online", online))
            for row in report.get("repeats", [])]
    if not rows:
        return ""
    table = pd.DataFrame(rows)
    noisy = int(table["noisy"].sum())
    return (f"## Noise\n\nEach level measured {len(rows[0]['runs'])} times on one server "
            "(`perf.repeats`); the tables keep the run of median throughput. `ci95`: the "
            "median's 95 % bootstrap interval; `noisy`: the runs' range is wider than "
            f"perf_analyzer's stability criterion. {noisy} of {len(table)} levels noisy.\n\n"
            + markdown_table(table) + "\n\n")


def host_load_section(offline: dict, online: dict, native: dict) -> str:
    """What else used the host's CPUs while each level was measured
    (deploybench.measurement.host_load), and the levels measured under contention."""
    rows = [{"Scenario": scenario, **row} for scenario, report in
            (("offline", offline), ("online", online)) for row in report.get("host_load", [])]
    if "host_load" in native:
        rows.append({"Scenario": "native", **native["host_load"]})
    if not rows:
        return "Not recorded (measured before host load was)."
    table = pd.DataFrame(rows)
    gpu = "other_gpu_processes" in table
    if gpu:
        table["other_gpu_processes"] = table["other_gpu_processes"].map(_gpu_processes)
    contended = table[table["contended"]]
    limit = f"{CONTENDED_SHARE:g} cores of other processes per CPU the step could run on"
    verdict = (f"**{len(contended)} of {len(table)} measurements ran beside other load** "
               f"(more than {limit}" + (", or another process on the GPU" if gpu else "")
               + "): compare them with care." if len(contended) else
               f"No measurement ran beside other load (at most {limit}"
               + (", no other process on the GPU" if gpu else "") + ").")
    return ("CPU used by processes outside the step (its server and perf_analyzer "
            "excluded), in cores on average over each measurement"
            + ("; the other processes NVML listed on the GPU at its start and end" if gpu
               else "") + f". {verdict}\n\n" + markdown_table(table))


def _gpu_processes(listed) -> str:
    """Other processes on the GPU as a table cell (pid, name, memory), or why NVML could
    not list them."""
    if not isinstance(listed, list):
        return listed if isinstance(listed, str) else ""
    return ", ".join(
        f"{p['pid']} {p['name'] or ('?' if p['seen'] else '(another PID namespace)')}"
        + (f" ({p['used_mib']:.0f} MiB)" if p.get("used_mib") is not None else "")
        for p in listed) or "none"


def telemetry_section(files: dict, offline: dict, online: dict, native: dict) -> str:
    """What the serving processes and the GPU did while each row was measured (the
    telemetry columns of offline.csv, online.csv and native.csv), and the readings NVML
    could not give."""
    keys = ["Batch", "Concurrency", SHARED_MEMORY]
    parts = []
    for scenario in ("offline", "online", "native"):
        if scenario not in files:  # no online scenario
            continue
        table = pd.read_csv(files[scenario])
        recorded = [c for c in TELEMETRY_COLUMNS if c in table]
        if recorded:
            parts.append(table[[c for c in keys if c in table] + recorded]
                         .assign(Scenario=scenario))
    if not parts:
        return "Not recorded (measured before telemetry was)."
    table = pd.concat(parts, ignore_index=True)
    table = table[["Scenario", *[c for c in table if c != "Scenario"]]]
    missing = sorted({f"{what.replace('_', ' ')}: {why}"
                      for report in (offline, online, native)
                      for row in report.get("telemetry", [])
                      for what, why in _unavailable(row.get("gpu"))})
    gpu = any("gpu" in row for report in (offline, online, native)
              for row in report.get("telemetry", []))
    text = ("CPU (% of one core) and resident memory of the process tree that served each "
            "row: the server and its python-backend stubs, the step itself for native "
            "(host-array timing).")
    if gpu:
        text += (" On the GPU, through NVML, sampled every 100 ms: utilisation, memory, "
                 "power, SM clock, the clock event (throttle) reasons seen; energy per "
                 "inference is the mean power over the throughput.")
    if missing:
        text += "\n\nNot available here: " + "; ".join(missing) + "."
    return text + "\n\n" + markdown_table(table)


def _unavailable(gpu) -> list[tuple[str, str]]:
    """(reading, reason) of what NVML could not give in one row's GPU telemetry."""
    if isinstance(gpu, str):
        return [("GPU telemetry", gpu.removeprefix("unavailable: "))]
    return [(what, value.removeprefix("unavailable: ")) for what, value in (gpu or {}).items()
            if isinstance(value, str) and value.startswith("unavailable: ")]
