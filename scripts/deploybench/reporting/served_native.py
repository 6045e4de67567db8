"""Served against native: each offline row beside the in-process figure of the same
batch and data path, a ratio left out where one side ran beside other load and the other
did not (what it would measure is the neighbour, not serving)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import facts, formats
from ..records.tables import (
    DEVICE_THROUGHPUT,
    SERVED_BY,
    SHARED_MEMORY,
    THROUGHPUT,
    lead_mode,
    read_perf,
)
from .markdown import markdown_table

# Which side of a row ran under contention (host_load.contended): "", served, native, both
CONTENDED = "contended"
RATIO = "served/native"
# An ensemble's native loop, before it made the request apart (native.json `timed_from`),
# timed the making of the request from the samples too: its clients' work, not serving's
UNMATCHED = "native timed the request's making too"
# An ensemble whose tables were not whole on the device: the native loop's hierarchical store
# is the pipeline's python one, the served figure's the C++ backend's, so a ratio of the two
# compares two stores' caches, not serving (1.59M served against 0.30M native, 2026-11-29)
OTHER_STORE = "native's cached lookups are the python store's"


def report_of(csv: Path) -> dict:
    """The JSON a table's step wrote beside it (empty where it has none)."""
    path = Path(csv).with_suffix(".json")
    return formats.read(path) if path.is_file() else {}


def served_vs_native(offline_csv: Path, native_csv: Path) -> pd.DataFrame:
    """Offline rows beside the native figure of the same data path: host arrays for
    system shared memory, device-resident tensors for CUDA shared memory (where the
    runner has them). A row whose served or native side alone was contended has no
    ratio (`contended` says which); both contended, alike conditions, keeps it."""
    served_report, native_report = report_of(offline_csv), report_of(native_csv)
    mismatch = facts.same_device(served_report.get("provenance", {}),
                                      native_report.get("provenance", {}))
    if mismatch:
        raise facts.DifferentDevices(f"served/native not computed: {mismatch}")
    served = read_perf(offline_csv)
    ensemble = SERVED_BY in served and set(served[SERVED_BY].dropna()) == {"ensemble"}
    served = served[["Batch", SHARED_MEMORY, THROUGHPUT]]
    native = pd.read_csv(native_csv)
    column = {"system": THROUGHPUT, "cuda": DEVICE_THROUGHPUT}
    served["native column"] = served[SHARED_MEMORY].map(column).fillna(THROUGHPUT)
    native_value = {(row["Batch"], name): row.get(name) for _, row in native.iterrows()
                    for name in set(column.values())}
    served[f"{THROUGHPUT} native"] = [native_value.get((b, c)) for b, c in
                                      zip(served["Batch"], served["native column"])]
    served = served.rename(columns={THROUGHPUT: f"{THROUGHPUT} served"})
    served[RATIO] = (served[f"{THROUGHPUT} served"] / served[f"{THROUGHPUT} native"]).round(3)
    served[CONTENDED] = [
        _sides(facts.contended(served_report, {"Batch": b, SHARED_MEMORY: mode}),
               facts.contended(native_report, {"Batch": b}))
        for b, mode in zip(served["Batch"], served[SHARED_MEMORY])]
    if ensemble and native_report.get("timed_from") != "request":
        served[CONTENDED] = UNMATCHED
    elif ensemble and _cached(served_report, native_report):
        served[CONTENDED] = OTHER_STORE
    served.loc[served[CONTENDED].isin(["served", "native", UNMATCHED, OTHER_STORE]),
               RATIO] = float("nan")
    return served.dropna(subset=[f"{THROUGHPUT} native"])


def _cached(served_report: dict, native_report: dict) -> bool:
    """Whether an ensemble's lookups went through a cache: the native store not whole on
    the device (native.json says so since 2026-11-29), or served lookups that missed."""
    whole = native_report.get("sparse_store", {}).get("whole_on_device", True)
    return not whole or served_report.get("embedding_cache", {}).get("hit_rate", 1.0) < 1.0


def _sides(served: bool, native: bool) -> str:
    return {(False, False): "", (True, False): "served", (False, True): "native",
            (True, True): "both"}[(served, native)]


def left_out(row: pd.Series) -> str:
    """Why a row has no ratio (empty where it has one)."""
    if row[CONTENDED] == UNMATCHED:
        return f"left out: {UNMATCHED} (the ensemble's samples made into its request)"
    if row[CONTENDED] == OTHER_STORE:
        return (f"left out: {OTHER_STORE}, the served ones the C++ backend's (tables not whole "
                "on the device)")
    if row[CONTENDED] in ("served", "native"):
        quiet = "native" if row[CONTENDED] == "served" else "served"
        return f"left out: {row[CONTENDED]} ran beside other load, {quiet} did not"
    return ""


def served_vs_native_table(offline_csv: Path, native_csv: Path) -> str:
    try:
        ratio = served_vs_native(offline_csv, native_csv)
    except facts.DifferentDevices as refused:
        return f"**{refused}**"
    missing = [f"batch {r['Batch']} ({r[SHARED_MEMORY]}): {left_out(r)}"
               for _, r in ratio.iterrows() if left_out(r)]
    note = ("**served/native left out** where one side ran beside other load and the other "
            "did not (both contended: kept): " + "; ".join(missing) + ".\n\n"
            if missing else "")
    return note + markdown_table(ratio)


def at_max_batch(ratio: pd.DataFrame) -> pd.Series:
    """The row of the largest batch, in the mode the figures lead with (tables.lead_mode:
    a reference's, where measured)."""
    top = ratio[ratio["Batch"] == ratio["Batch"].max()]
    top = top[top[SHARED_MEMORY] == lead_mode(top[SHARED_MEMORY])]
    return top.loc[top[f"{THROUGHPUT} served"].idxmax()]
