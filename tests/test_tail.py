"""Every request's tail (deploybench.records.tail): the 95 % bootstrap intervals cover the true
percentile of a known distribution about 95 % of the time."""

import numpy as np

from deploybench.records import tail

# Exponential latencies of mean 1 ms: the q-quantile is -ln(1 - q), p50 ln 2, p90 ln 10.
TRUE_MS = {"p50": np.log(2), "p90": np.log(10)}


def test_the_95_percent_intervals_cover_the_true_percentile_95_percent_of_the_time():
    """300 seeded samples of 200 requests: p50's and p90's intervals cover the true value
    in 0.95 of them (0.92-0.98 allowed: the binomial spread of 300 trials is 0.013); a 90 %
    interval covers p50 0.87 of the time, a 99 % one 0.987, and both fail. (A p99 resting
    on 200 requests, two of them above it, is covered 0.85 of the time whatever the
    interval's level: the bootstrap cannot widen past the largest request.)"""
    covered = {q: 0 for q in TRUE_MS}
    for seed in range(300):
        latencies = np.random.default_rng(1000 + seed).exponential(1.0, 200)
        found = tail.percentiles(latencies, seed=seed)
        for q, true in TRUE_MS.items():
            low, high = found[q]["ci95"]
            covered[q] += low <= true <= high
            assert low <= found[q]["value"] <= high
    share = {q: n / 300 for q, n in covered.items()}
    assert all(0.92 <= s <= 0.98 for s in share.values()), share


def test_a_levels_summary_from_perf_analyzers_export_and_its_table(tmp_path):
    """The real export's six kept requests over 1.067195838 s (test_perf_analyzer_output):
    their count, span and percentiles, the export deleted once read; the report's row:
    each percentile to 3 figures with its interval."""
    import shutil
    from pathlib import Path

    export = tmp_path / "export.json"
    shutil.copy(Path(__file__).parent / "data/perf_analyzer/rate_200_export.json", export)
    found = tail.summary(export)
    assert (found["requests"], found["seconds"]) == (6, 1.067) and not export.exists()
    assert found["percentiles_ms"]["p50"]["value"] == 0.8271
    level = {"Concurrency": 2, **found}
    row = tail.table([level], ("Concurrency",)).iloc[0]
    low, high = found["percentiles_ms"]["p99"]["ci95"]
    assert row["Concurrency"] == 2 and row["requests"] == 6
    assert row["p99 ms (95 % interval)"] == f"0.895 ({low:.3g}-{high:.3g})"
    assert row["p50 ms (95 % interval)"].startswith("0.827 (")


def test_every_request_is_resampled_the_first_as_any_other():
    """One 50 ms request among 99 of 1 ms: p99.9 at rank 98.901 is 1 + 0.901 x 49 = 45.149 ms; 37 %
    of resamples of 100 miss the slow request (0.99^100), so the interval runs from 1 ms to
    at least that; a bootstrap that never drew it would give 1-1."""
    found = tail.percentiles(np.array([50.0] + [1.0] * 99))["p99.9"]
    assert found["value"] == 45.149
    assert found["ci95"][0] == 1.0 and found["ci95"][1] >= 45.149
