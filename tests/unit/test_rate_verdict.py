"""A rate level's tail and verdict, from the windows perf_analyzer kept: the budget kept only
where the rate was sent as offered and kept up with."""

import json

import numpy as np
import pytest

from deploybench.reporting.rate import max_rate_sentence
from deploybench.sweeps import open_loop


def test_the_tail_is_read_from_the_windows_perf_analyzer_kept(tmp_path, monkeypatch):
    """An export in perf_analyzer's layout with five windows, the first two slow (it was
    settling): only the last three windows' requests count, read alike in chunks that cut
    the numbers anywhere; each percentile lies within its interval."""
    from deploybench.records import tail

    ms = 1_000_000
    bounds = [i * 1000 * ms for i in range(6)]
    requests, expected = [], []
    for window in range(5):
        for i in range(200):
            sent = bounds[window] + i * 5 * ms
            latency = (50 if window < 2 else 1 + i % 10) * ms
            requests.append({"timestamp": sent, "request_inputs": {"x": [0.5] * 8},
                             "response_timestamps": [sent + latency],
                             "response_outputs": [{"y": [1.0]}]})
            if window >= 2:
                expected.append(latency / ms)
    export = tmp_path / "export.json"
    export.write_text(json.dumps({"experiments": [{
        "experiment": {"mode": "request_rate", "value": 200}, "requests": requests,
        "window_boundaries": bounds}], "version": "", "service_kind": "triton"}))
    for chunk in (1 << 24, 97, 65):
        monkeypatch.setattr(tail, "_CHUNK", chunk)
        latencies, sending, answering = tail.request_latencies(export)
        assert sorted(latencies.tolist()) == sorted(expected), chunk
        assert sending == pytest.approx(2 + 199 * 5 / 1000)
    found = tail.percentiles(latencies)
    assert found["p50"]["value"] == pytest.approx(float(np.percentile(expected, 50)))
    for name, q in found.items():
        low, high = q["ci95"]
        assert low <= q["value"] and (high is None or q["value"] <= high), (name, q)
    # 600 requests bound p99 from above (0.99^600 < 0.025), not p99.9 (0.999^600 = 0.55)
    assert found["p99"]["ci95"][1] is not None and found["p99.9"]["ci95"][1] is None


def test_a_level_keeps_the_budget_only_if_sent_as_offered_and_kept_up_with():
    """Within the budget: p99 within it, answered at 95 % of the rate sent, and sent at the
    offered rate up to a Poisson draw's spread (4 standard deviations: 1,000 requests
    expected, 873 at least); the bracket's sentence says which failed."""
    keeps = open_loop.keeps_budget
    # p99, budget, offered, sent and answered a second, seconds sending: kept or not. At the
    # edges: a p99 equal to the budget and 95 % answered keep it; over two seconds at
    # 1,000/s (2,000 expected, less 4 standard deviations and one: 1,820.1) 911/s keeps it
    # and 910/s does not; at 1,250/s 2,299 sent (2,500 - 200 - 1) is on the bound itself
    for *level, kept in [(10, 20, 1000, 1000, 990, 1, True), (21, 20, 1000, 1000, 990, 1, False),
                         (10, 20, 1000, 1000, 940, 1, False), (10, 20, 1000, 874, 874, 1, True),
                         (10, 20, 1000, 872, 872, 1, False), (20, 20, 1000, 1000, 950, 1, True),
                         (20.001, 20, 1000, 1000, 950, 1, False),
                         (20, 20, 1000, 1000, 949.9, 1, False), (5, 20, 1000, 911, 911, 2, True),
                         (5, 20, 1000, 910, 910, 2, False),
                         (5, 20, 1250, 1149.5, 1149.5, 2, True)]:
        assert keeps(*level) is kept, level

    def level(offered, p99, sent, achieved):
        return {open_loop.OFFERED: offered, open_loop.EVERY["p99"]: p99,
                open_loop.SENT: sent, open_loop.ACHIEVED: achieved,
                open_loop.P99_CI[0]: p99 - 1, open_loop.P99_CI[1]: p99 + 1,
                open_loop.THROUGHPUT: achieved,
                open_loop.WITHIN: keeps(p99, 20, offered, sent, achieved, 2.0)}

    def bisected(server_answers, client_sends):
        """The bracket found from 1,000 (within) and 8,000/s, two steps more."""
        def measure(offered):
            sent = min(offered, client_sends)
            slow = sent > server_answers
            levels.append(level(offered, 900 if slow else 5, sent, min(sent, server_answers)))
        levels = [level(1000, 5, 1000, 1000)]
        measure(8000)
        return open_loop._bisect(levels, measure, steps=2, budget=20)

    found = bisected(server_answers=3000, client_sends=10_000)
    assert found["bracket"] == [2750, 4500] and found["beyond"] == "exceeded it (p99 900 ms)"
    found = bisected(server_answers=10_000, client_sends=5000)
    assert found["bracket"] == [4500, 6250], found
    assert found["beyond"].startswith("could not be offered (perf_analyzer sent 5000/s")
    levels = [level(1000, 5, 1000, 1000), level(2000, 5, 2000, 1500)]
    found = open_loop._bisect(levels, None, steps=0, budget=20)
    assert found["bracket"] == [1000, 2000] and found["beyond"].startswith("built a backlog")
    # a level perf_analyzer gave nothing for (killed, or its connections refused) is beyond
    failed = "made perf_analyzer fail (exit code 99: rate.json holds its error)"
    levels = [level(1000, 5, 1000, 1000), {open_loop.OFFERED: 6000, open_loop.WITHIN: False,
                                           open_loop.FAILED: failed}]
    found = open_loop._bisect(levels, None, steps=0, budget=20)
    assert found["bracket"] == [1000, 6000] and found["beyond"] == failed
    assert max_rate_sentence(found, 20).endswith(f"6000 requests/s {failed}.")


def test_the_bracket_past_a_noisy_level_and_its_midpoints():
    """The bracket: the highest rate within the budget, the lowest beyond it above that (a
    level beyond below a level within, a noisy one, does not close it), each step's rate
    the bracket's middle to the thousandth; no bracket where one side has no level."""
    def level(offered, within):
        return {open_loop.OFFERED: offered, open_loop.WITHIN: within,
                open_loop.EVERY["p99"]: 5 if within else 900, open_loop.SENT: offered,
                open_loop.ACHIEVED: offered, open_loop.THROUGHPUT: offered * 0.99,
                open_loop.P99_CI[0]: 4, open_loop.P99_CI[1]: 6}

    levels = [level(1000, True), level(2000, False), level(3000, True), level(11.0015e3, False)]
    asked = []

    def measure(offered):
        asked.append(offered)
        levels.append(level(offered, offered < 5000))

    found = open_loop._bisect(levels, measure, steps=3, budget=20)
    assert asked == [7000.75, 5000.375, 4000.188]  # (3000 + 11001.5) / 2, then halves
    assert found["bracket"] == [4000.188, 5000.375] and found["rate"] == 4000.188
    assert found["throughput"] == 4000.188 * 0.99 and found["p99_ms"] == 5
    assert found["bracketed"] and found["beyond"] == "exceeded it (p99 900 ms)"
    alone = open_loop._bisect([level(1000, True)], None, steps=2, budget=20)
    assert alone["bracket"] == [1000, None] and not alone["bracketed"]
    assert alone["beyond"] is None and alone["rate"] == 1000
    none = open_loop._bisect([level(1000, False)], None, steps=2, budget=20)
    assert none["bracket"] == [None, 1000] and none["rate"] is None and none["p99_ms"] is None
