"""The latency tail from every request of a measurement: perf_analyzer's profile export
(--profile-export-file) read for the requests of the windows it kept, their percentiles
with bootstrap confidence intervals. perf_analyzer's own p99 of a 500-request window rests
on 5 requests; these say how far such a figure can be trusted."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

PERCENTILES = (50, 90, 95, 99, 99.9)
# perf_analyzer's measurement: its last three windows merged (its stability window); the
# export holds every window it measured while it settled
KEPT_WINDOWS = 3
BOOTSTRAP_SAMPLES = 1000
CONFIDENCE = 0.95
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
        raise ValueError(f"{export}: {len(sent)} requests in the kept windows: no rate")
    return ((answered - sent) / 1e6, float(sent.max() - sent.min()) / 1e9,
            float(answered.max() - sent.min()) / 1e9)


def percentiles(latencies_ms: np.ndarray, seed: int = 0) -> dict[str, dict]:
    """Each of PERCENTILES of `latencies_ms` with its 95 % bootstrap interval (resampled
    requests, seeded), in ms: {"p99": {"value", "ci95": [low, high]}, ...}."""
    values = np.asarray(latencies_ms, dtype=float)
    if not len(values):
        raise ValueError("no request latencies: nothing to take percentiles of")
    rng = np.random.default_rng(seed)
    resampled = []
    for start in range(0, BOOTSTRAP_SAMPLES, 100):  # in blocks: memory stays bounded
        draws = rng.integers(0, len(values), (min(100, BOOTSTRAP_SAMPLES - start),
                                               len(values)))
        resampled.append(np.percentile(values[draws], PERCENTILES, axis=1).T)
    boot = np.vstack(resampled)
    tail = (1 - CONFIDENCE) / 2
    out = {}
    for i, q in enumerate(PERCENTILES):
        low, high = np.quantile(boot[:, i], [tail, 1 - tail])
        out[f"p{q:g}"] = {"value": round(float(np.percentile(values, q)), 4),
                          "ci95": [round(float(low), 4), round(float(high), 4)]}
    return out


def summary(export: Path) -> dict:
    """A level's tail for its scenario's JSON, from its export (deleted once read: it
    holds every request's data)."""
    latencies, _, seconds = request_latencies(export)
    Path(export).unlink()
    return {"requests": len(latencies), "seconds": round(seconds, 3),
            "percentiles_ms": percentiles(latencies)}


def table(levels: list[dict], keys: tuple[str, ...]) -> pd.DataFrame:
    """The levels' tails (`summary`, beside their `keys`) as a report shows them: each
    percentile with its 95 % interval."""
    rows = []
    for level in levels:
        row = {k: level[k] for k in keys} | {"requests": level["requests"]}
        for name, q in level["percentiles_ms"].items():
            low, high = q["ci95"]
            row[f"{name} ms (95 % interval)"] = f"{q['value']:.3g} ({low:.3g}-{high:.3g})"
        rows.append(row)
    return pd.DataFrame(rows)
