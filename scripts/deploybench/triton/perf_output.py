"""What perf_analyzer prints, read: its CSV as a row of the reference tables (milliseconds),
the spread of the windows it printed (-v), and the requests the server answered that it did
not send (another client's)."""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np

from ..records.tables import (
    COMPONENT_SUM,
    COMPONENTS,
    LATENCY_COLUMNS,
    SHARED_MEMORY,
    THROUGHPUT,
)
from ..records.tail import KEPT_WINDOWS
from .perf_command import Row
from .perf_failures import PerfError

# perf_analyzer's CSV columns (microseconds), as the reference tables' (milliseconds).
PA_TO_TABLE = dict(zip(
    ["Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
     "Server Compute Infer", "Server Compute Output", "Client Recv", "p50 latency",
     "p90 latency", "p95 latency", "p99 latency", "Avg latency"],
    LATENCY_COLUMNS, strict=True))

REQUESTS = "requests/s"  # beside THROUGHPUT (batch x requests/s), in the scenario's JSON

# What perf_analyzer prints (-v) for each window, and when no three windows agreed
WINDOW = re.compile(r"Pass \[\d+\] throughput: ([0-9.e+]+) infer/sec\. Avg latency: (\d+) usec")
UNSETTLED = "Failed to obtain stable measurement"
# a time window that ended before any request did: too short for this level
EMPTY_WINDOW = "No valid requests recorded within time interval"
# How long perf_analyzer's query of the server's statistics at a window's edge may take on a
# busy host: requests that end meanwhile are the server's and not the client's (seen: 7 over
# the kept windows of a 1,000 requests/s level on 2 busy cores, 2026-11-28, with no other client)
STATISTICS_QUERY_S = 0.002
# Requests of the kept windows: perf_analyzer's (client) and all the server answered
SENT = re.compile(r"Client: *\n\s*Request count: (\d+)")
ANSWERED = re.compile(r"Successful request count: (\d+)")
# in the row of a run: requests the server answered in its windows that it did not send
FOREIGN = "foreign requests"


def parse_csv(text: str, row: Row) -> dict:
    """One perf_analyzer CSV (one concurrency level) -> one row in the reference tables'
    units."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise PerfError(f"expected one measurement row from perf_analyzer, got {len(rows)}")
    measured = rows[0]
    # perf_analyzer counts -b inferences a request: 1 where the batch is in the tensors
    per_second = float(measured["Inferences/Second"])
    # the rate scenario's CSV has the offered rate where the others have the concurrency
    table = {"Batch": row.batch, "Concurrency": int(measured.get("Concurrency", 0)),
             THROUGHPUT: per_second * row.batch if row.shapes else per_second,
             REQUESTS: per_second if row.shapes else per_second / row.batch}
    table |= {ms: float(measured[us]) / 1000.0 for us, ms in PA_TO_TABLE.items()}
    return table | {SHARED_MEMORY: row.shared_memory,
                    COMPONENT_SUM: sum(table[c] for c in COMPONENTS)}


def foreign_requests(stdout: str, row: Row, measured: dict) -> int | None:
    """The requests the server answered in the windows perf_analyzer kept beyond those it
    sent there (another client's: the server's statistics count everyone's), less what
    the windows' edges account for: at both edges of each kept window, the requests in
    flight and those ending while perf_analyzer queries the statistics, which one side
    counts and the other not; None where perf_analyzer printed no counts."""
    sent, answered = SENT.search(stdout), ANSWERED.search(stdout)
    if not sent or not answered:
        return None
    in_flight = (math.ceil(row.rate * measured["p99 latency (ms)"] / 1000) + 1 if row.rate
                 else row.concurrency)
    edge = in_flight + math.ceil(measured.get(REQUESTS, 0) * STATISTICS_QUERY_S)
    return max(0, int(answered.group(1)) - int(sent.group(1)) - 2 * KEPT_WINDOWS * edge)


def window_spread(stdout: str) -> float:
    """The spread of the last three windows perf_analyzer printed (those its stability
    criterion compares): the larger of throughput's and average latency's (max - min) /
    mean, in %; NaN where it printed fewer."""
    windows = np.array(WINDOW.findall(stdout), dtype=float)[-3:]
    if len(windows) < 3:
        return float("nan")
    spreads = (windows.max(axis=0) - windows.min(axis=0)) / windows.mean(axis=0) * 100
    return round(float(spreads.max()), 2)

