"""A level measured several times (perf.repeats: fresh perf_analyzer runs on one server):
the run a table keeps, and how far the runs spread."""

from __future__ import annotations

import numpy as np

from ..records.tables import THROUGHPUT

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


def median_run(runs: list[dict]) -> dict:
    """The run of median throughput (the lower middle one of an even count): a whole
    measured row, so its latencies and components stay one measurement's."""
    ordered = sorted(runs, key=lambda r: r[THROUGHPUT])
    return ordered[(len(ordered) - 1) // 2]


def spread(throughputs: list[float], stability_percentage: float) -> dict:
    """The runs' throughputs, their median with a 95 % bootstrap interval (resampled
    medians, seeded), their range in % of the median, and whether that range is wider
    than perf_analyzer's own stability criterion (`noisy`)."""
    values = np.asarray(throughputs, dtype=float)
    median = float(np.median(values))
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(values, (BOOTSTRAP_SAMPLES, len(values))), axis=1)
    low, high = np.quantile(medians, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    range_pct = float((values.max() - values.min()) / median * 100) if median else 0.0
    return {"runs": [round(v, 2) for v in values.tolist()], "median": round(median, 2),
            "ci95": [round(float(low), 2), round(float(high), 2)],
            "range_pct": round(range_pct, 2), "noisy": range_pct > stability_percentage}
