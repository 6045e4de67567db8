"""The tests' Little's-law check (conftest.check_littles_law) on tables worked out by hand:
what a real level gives passes, a throughput 5 % or 15 % low fails."""

import pandas as pd
import pytest

from testkit.measured import check_littles_law


def table(throughput: float, latency_ms: float, batch: int = 4, concurrency: int = 2):
    return pd.DataFrame({"Batch": [batch], "Concurrency": [concurrency],
                         "Inferences/Second": [throughput], "avg latency (ms)": [latency_ms]})


def test_a_real_level_obeys_the_law():
    """The online level of tests/data/perf_analyzer: 2 clients, 1.048 ms, 1888.2/s: each
    request 2 / 1888.2 s = 1.0592 ms, 0.011 ms of the client's own."""
    check_littles_law(table(1888.2, 1.048, batch=1), "perf_analyzer's real level")
    # batch 4, concurrency 2, 5 ms: 1,600/s by the law; 0.05 ms of client time a request
    check_littles_law(table(8 / 5.05e-3, 5.0), "client time")


@pytest.mark.parametrize("low, latency_ms", [(0.95, 5.0), (0.95, 3.4), (0.85, 1.0),
                                             (0.85, 0.8)])
def test_a_throughput_below_the_law_fails(low, latency_ms):
    """5 % low at 5 ms: each request 5.263 ms, 0.263 ms of client time > 0.1 + 0.1; 15 % low
    at 1 ms: 0.176 > 0.12."""
    with pytest.raises(AssertionError):
        check_littles_law(table(low * 8 / (latency_ms / 1e3), latency_ms), "low")


def test_above_the_law_only_within_a_time_windows_slack():
    check_littles_law(table(1.04 * 1600, 5.0), "time windows", time_windows=True)
    with pytest.raises(AssertionError):
        check_littles_law(table(1.04 * 1600, 5.0), "count windows")
