"""A configuration folder's scenario table and JSON, written by hand (what to ship, the
quantized configurations' accuracy gate)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from deploybench.records import formats
from deploybench.records.tables import LATENCY_COLUMNS

COLUMNS = ["Batch", "Concurrency", "Inferences/Second", "p99 latency (ms)", "Shared memory",
           "Served by", "Stable", "GPU utilization mean (%)", "energy per inference (mJ)"]


def measured(folder: Path, levels: list[tuple], *, served_by="deploybench", code="new",
             date="2026-11-29T00:00:00", contended=(), gpus=1, scenario="online",
             config: str | None = None, rate: dict | None = None) -> Path:
    """A scenario's table and JSON: levels of (concurrency, inf/s, p99 ms, stable)."""
    folder.mkdir(parents=True)
    rows = [(16, c, t, p, "none", served_by, s, 70.0 + i, 2.5) for i, (c, t, p, s) in
            enumerate(levels)]
    table = pd.DataFrame(rows, columns=COLUMNS)
    for column in LATENCY_COLUMNS:  # perf_analyzer's other columns, beside p99
        if column not in table:
            table[column] = 1.0
    table.to_csv(folder / f"{scenario}.csv", index=False)
    (folder / f"{scenario}.json").write_text(formats.text({
        "host_load": [{"Batch": 16, "Concurrency": c, "contended": c in contended}
                      for c, *_ in levels],
        "triton": {"gpus": gpus, "instances": 1},
        "provenance": {"date": date, "project": {"code": code},
                       "server": {"served_by": served_by}}}))
    if config:
        (folder / "config.pbtxt").write_text(config)
    if rate:
        (folder / "rate.json").write_text(formats.text(
            {"settings": {"p99_budget_ms": 25}, "max_rate_within_budget": rate}))
    return folder
