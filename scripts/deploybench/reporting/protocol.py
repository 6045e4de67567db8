"""Whether a measured configuration ran as its reference document did: what its scenario
JSONs recorded against the document's protocol, the parameters its published tables state
(parsed into config/reference/tables.csv) and, where they state none, its runner's (the
model config's scenario and Triton settings: `reference.protocol`, resolve.Settings, which
tests/unit/test_reference_settings.py holds to the documents' commands). Only a configuration
that ran so stands beside the published tables; the model report names the others and how
each differs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import formats, layout
from ..records.tables import reference_rows
from .markdown import shared_memory, warm_up, windows


def scenarios_ran(folder: Path) -> dict:
    """What a configuration folder's scenario JSONs recorded, offline and online, by scenario
    (those it holds)."""
    return {scenario: formats.read(path) for scenario in ("offline", "online")
            if (path := Path(folder) / f"{scenario}.json").is_file()}


def _perf_settings_of(scenario: str) -> dict:
    """How perf_analyzer measured a scenario: the published tables do not say (their
    documents' runners did, and the online runners differ from the offline ones)."""
    return {f"{key}_{scenario}": (
                f"{name} ({scenario})", scenario,
                lambda ran, backend, read=read: read(ran["perf_analyzer_settings"]))
            for key, name, read in (
                ("protocol", "Protocol", lambda measured: measured.get("protocol", "").upper()),
                ("shared_memory", "Shared memory", shared_memory),
                ("windows", "Windows", windows),
                ("warm_up", "Warm-up", warm_up))}


# The published settings of a series (reference column) and ours, from what a
# configuration's scenario JSONs recorded (and its backend): setting -> (row, scenario, read).
SETTINGS = {
    "max_batch_size": ("Max batch size", "offline",
                       lambda ran, backend: ran["triton"]["max_batch_size"]),
    "number_of_model_instances": ("Number of model instances", "offline",
                                  lambda ran, backend: ran["triton"]["instances"]),
    "triton_max_queue_delay": ("Triton max queue delay (us)", "offline",
                               lambda ran, backend: ran["triton"]["max_queue_delay_us"]),
    "triton_preferred_batch_sizes": (
        "Triton preferred batch sizes", "offline",
        lambda ran, backend: " ".join(map(str, ran["triton"]["preferred_batch_sizes"]))),
    "request_count": (
        "Request count (offline)", "offline",
        lambda ran, backend: ran["perf_analyzer_settings"].get("measurement_request_count")
        if ran["perf_analyzer_settings"].get("measurement_mode") != "time_windows" else None),
    "export_precision": ("Export precision", "offline",
                         lambda ran, backend: ran["export_precision"].upper()),
    "nvidia_tensorrt_capture_cuda_graph": (
        "TensorRT CUDA graphs", "offline",
        lambda ran, backend: ("Enabled" if ran["triton"].get("cuda_graphs") else "Disabled")
        if backend.endswith("trt") else None),
    **_perf_settings_of("offline"),
    **_perf_settings_of("online"),
}


def setting_text(value) -> str:
    """A setting as the settings table shows it (empty: not stated)."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value in ("-", "None"):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _document_ran(reference: dict, scenario: str, name: str) -> dict | None:
    """What a measurement of configuration `name` under the document's runner would record
    for a scenario (reference.protocol), None where the runner has no such scenario."""
    runner = reference.get("protocol", {})
    if scenario not in runner:
        return None
    exported = runner.get("export_precision", {}).get(name)
    return {"perf_analyzer_settings": runner[scenario], "triton": runner["triton"],
            **({"export_precision": exported} if exported else {})}


def _alike(key: str, measured: str, document: str, ran: dict, document_ran: dict) -> bool:
    """Whether a recorded setting is the document's: its shared-memory mode among those
    measured (CUDA shared memory may stand beside it), as many warm-up windows (the levels'
    wording and the windows' count were recorded later), else the same text."""
    if key.startswith("shared_memory"):
        return document in measured.split(" and ")
    if key.startswith("warm_up"):
        return (ran["perf_analyzer_settings"].get("warmup_windows", 0)
                == document_ran["perf_analyzer_settings"].get("warmup_windows", 0))
    return measured == document


def differences(folder: Path, reference: dict) -> list[str]:
    """How a configuration's recorded settings differ from its document's protocol, in
    words: for each scenario the document publishes that the folder measured, each setting
    its tables state (any of their values) or, where they state none, its runner's; a
    setting that does not apply to it (TensorRT's graphs elsewhere) is passed over."""
    where = layout.configuration_of(folder)
    rows = reference_rows(Path(reference["path"]), reference["document"],
                          reference.get("where", {}))
    found = {}
    for scenario, ran in scenarios_ran(folder).items():
        if scenario not in set(rows["scenario"]):
            continue
        runner = _document_ran(reference, scenario, where["name"])
        for key, (name, of, read) in SETTINGS.items():
            stated = ({setting_text(v) for v in rows[key]} - {""} if key in rows else set())
            if of != scenario or read(ran, where["backend"]) is None:
                continue
            if not stated and runner:
                stated = {setting_text(read(runner, where["backend"]))} - {""}
            measured = setting_text(read(ran, where["backend"]))
            if stated and not any(_alike(key, measured, value, ran, runner or ran)
                                  for value in stated):
                found[key] = (f"{name}: {measured or 'not recorded'} (the document's: "
                              f"{' or '.join(sorted(stated))})")
        if "request_count" in found:  # the same count said once
            found.pop(f"windows_{scenario}", None)
    return list(found.values())
