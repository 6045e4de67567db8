"""The latency tail from every request of a measurement: perf_analyzer's profile export
(--profile-export-file) read for the requests of the windows it kept, their percentiles
with distribution-free confidence intervals. perf_analyzer's own p99 of a 500-request window
rests on 5 requests; these say how far such a figure can be trusted.

A percentile's interval runs between two of the requests' own latencies (order statistics),
chosen so that the count of requests below the true percentile, a binomial draw, falls
between them with 95 % probability: it holds for any latency distribution. A bootstrap
interval, used before 2026-12-07, cannot reach past the slowest request and covered p99 of
200 requests 85 % of the time. Where too few requests lie above a percentile for any of them
to bound it (fewer than ln(0.025) / ln(q) requests: 368 for p99, 3,688 for p99.9) its upper
end is None: unbounded, said so where reported."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

PERCENTILES = (50, 90, 95, 99, 99.9)
# perf_analyzer's measurement: its last three windows merged (its stability window); the
# export holds every window it measured while it settled
KEPT_WINDOWS = 3
CONFIDENCE = 0.95
UNBOUNDED = "∞"  # how a report shows an interval's missing upper end
# recorded beside each level's percentiles: JSONs of before 2026-12-07 hold bootstrap ones
INTERVALS = "95 %, order statistics"
# The export holds every request's inputs and outputs too (megabytes a request at a large
# batch): only these numbers are read, chunk by chunk, never the whole document at once.
_SENT = re.compile(rb'"timestamp": ?(\d+)[,}]')
_ANSWERED = re.compile(rb'"response_timestamps": ?\[(\d+)[,\]]')
_WINDOWS = re.compile(rb'"window_boundaries": ?\[([\d, ]*)\]')
_CHUNK = 1 << 24
_LONGEST_MATCH = 64  # bytes: a key and a 20-digit number, with room
_TAIL = 1 << 20  # bytes at the end holding the window boundaries


def _scan(path: Path) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Every request's send and first-response timestamps, in order, read in chunks (a
    match starting in a chunk's last bytes is left to the next chunk, which begins with
    them), and the window boundaries (the experiment's last field: in the file's tail)."""
    sent, answered = [], []
    carry = b""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            buffer = carry + chunk
            limit = max(len(buffer) - _LONGEST_MATCH, 0)
            for pattern, into in ((_SENT, sent), (_ANSWERED, answered)):
                into += [m.group(1) for m in pattern.finditer(buffer) if m.start() < limit]
            carry = buffer[limit:]
        for pattern, into in ((_SENT, sent), (_ANSWERED, answered)):
            into += [m.group(1) for m in pattern.finditer(carry)]
        f.seek(max(f.tell() - _TAIL, 0))
        windows = [m.group(1) for m in _WINDOWS.finditer(f.read())]
    return sent, answered, windows


class NoRequests(ValueError):
    """Fewer than two requests sent in the kept windows came back: far beyond saturation,
    the backlog outlasts the measurement (the main job's rate step on 2 cores, 2026-12-07:
    466 requests/s offered, latencies past 5 s, none of the last windows' requests answered)."""


def request_latencies(export: Path) -> tuple[np.ndarray, float, float]:
    """The latency (ms, send to first response) of every request of the windows perf_analyzer
    kept (the export holds all it measured); the span of their sends and the span from the
    first send to the last response (s): requests / the first is the rate they arrived at,
    / the second the rate they were answered at."""
    sent, answered, windows = _scan(Path(export))
    sent, answered = np.array(sent, dtype=np.int64), np.array(answered, dtype=np.int64)
    if len(sent) != len(answered):
        raise ValueError(f"{export}: {len(sent)} requests but {len(answered)} responses "
                         "(a request without an answer, or an export of another layout)")
    bounds = [int(b) for b in windows[-1].split(b",") if b] if windows else []
    if len(bounds) >= 2:  # the last KEPT_WINDOWS windows: those perf_analyzer reports
        first = bounds[max(len(bounds) - 1 - KEPT_WINDOWS, 0)]
        inside = (sent >= first) & (sent <= bounds[-1])
        sent, answered = sent[inside], answered[inside]
    if len(sent) < 2:
        raise NoRequests(f"{export}: {len(sent)} requests in the kept windows: no rate")
    return ((answered - sent) / 1e6, float(sent.max() - sent.min()) / 1e9,
            float(answered.max() - sent.min()) / 1e9)


def order_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None,
                                                                            int | None]:
    """0-based ranks of the sorted sample of `n` whose values bound its `q`-quantile with
    `confidence` at least (None: no rank does). B, the count of requests below the true
    quantile, is Binomial(n, q); [x(l), x(u)] covers it where l <= B < u. The lower rank l
    is the smallest k with P(B <= k) >= (1 - confidence) / 2, the upper u - 1 the smallest
    with P(B <= u - 1) >= (1 + confidence) / 2: each end misses with (1 - confidence) / 2 at
    most."""
    k = np.arange(n + 1)
    # log C(n, k), the binomial pmf and its CDF in logs first: (1 - q)^n underflows at large n
    log_choose = np.concatenate([[0.0], np.cumsum(np.log(n - k[1:] + 1) - np.log(k[1:]))])
    log_pmf = log_choose + k * np.log(q) + (n - k) * np.log1p(-q)
    cdf = np.cumsum(np.exp(log_pmf - log_pmf.max()))
    cdf /= cdf[-1]
    miss = (1 - confidence) / 2
    low = int(np.searchsorted(cdf, miss))  # P(B < low) < miss: x(low), 1-based
    high = int(np.searchsorted(cdf, 1 - miss))  # P(B > high) <= miss: x(high + 1), 1-based
    return (low - 1 if low >= 1 else None), (high if high <= n - 1 else None)


def percentiles(latencies_ms: np.ndarray) -> dict[str, dict]:
    """Each of PERCENTILES of `latencies_ms` with its 95 % interval (order_ranks), in ms:
    {"p99": {"value", "ci95": [low, high]}, ...}; an end no request bounds is None."""
    values = np.sort(np.asarray(latencies_ms, dtype=float))
    if not len(values):
        raise ValueError("no request latencies: nothing to take percentiles of")
    out = {}
    for q in PERCENTILES:
        value = float(np.percentile(values, q))
        low, high = order_ranks(len(values), q / 100)
        # widened to hold the interpolated value where a handful of requests put it past
        # an end (p99.9 of 25 requests or fewer: its lower end is the slowest request)
        ends = [None if low is None else min(values[low], value),
                None if high is None else max(values[high], value)]
        out[f"p{q:g}"] = {"value": round(value, 4),
                          "ci95": [None if e is None else round(float(e), 4) for e in ends]}
    return out


def interval_text(low: float | None, high: float | None) -> str:
    """An interval as a report shows it: `0.81-0.93`, an unbounded end as ∞ (or 0)."""
    return (f"{0 if low is None else low:.3g}-"
            f"{UNBOUNDED if high is None or high != high else format(high, '.3g')}")


def summary(export: Path) -> dict:
    """A level's tail for its scenario's JSON, from its export (deleted once read: it
    holds every request's data)."""
    latencies, _, seconds = request_latencies(export)
    Path(export).unlink()
    return {"requests": len(latencies), "seconds": round(seconds, 3),
            "percentiles_ms": percentiles(latencies), "intervals": INTERVALS}


def table(levels: list[dict], keys: tuple[str, ...]) -> pd.DataFrame:
    """The levels' tails (`summary`, beside their `keys`) as a report shows them: each
    percentile with its 95 % interval."""
    rows = []
    for level in levels:
        row = {k: level[k] for k in keys} | {"requests": level["requests"]}
        for name, q in level["percentiles_ms"].items():
            row[f"{name} ms (95 % interval)"] = f"{q['value']:.3g} ({interval_text(*q['ci95'])})"
        rows.append(row)
    return pd.DataFrame(rows)
