"""perf_analyzer's real output read against answers worked out by hand: its CSV (closed loop
and the rate scenario's) into every column in the reference tables' units, the window spread
from its -v lines, the requests of other clients, a level that never settles measured again
and kept flagged unstable, and its profile export read for the windows it kept.

The files in tests/data/perf_analyzer are perf_analyzer 2.50's own output against the toy
ONNX model of test_triton.py on the 2-core development machine (2026-12-07): an online level
at concurrency 2 over HTTP, an offline level of batch 4 in system shared memory that did not
settle within 10 windows, and the rate scenario at 200 requests/s (Poisson); the rate
level's export cut to 8 of its 430 requests (two before the kept windows, two in each), each
request as perf_analyzer wrote it."""

import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from deploybench.records import tail
from deploybench.records.tables import (
    COMPONENT_SUM,
    SHARED_MEMORY,
    STABLE,
    THROUGHPUT,
    WINDOW_SPREAD,
)
from deploybench.triton import perf_analyzer
from deploybench.triton.perf_command import Row
from deploybench.triton.perf_output import FOREIGN, REQUESTS

DATA = Path(__file__).resolve().parents[1] / "data" / "perf_analyzer"
ONLINE_CSV = (DATA / "online_c2_none.csv").read_text()
ONLINE_OUT = (DATA / "online_c2_none.stdout").read_text()
UNSETTLED_OUT = (DATA / "offline_b4_system_unstable.stdout").read_text()

# The online CSV's row in microseconds: Client Send 57, Network+Server Send/Recv 296, Server
# Queue 244, Compute Input 35, Compute Infer 333, Compute Output 81, Client Recv 0, p50 979,
# p90 1125, p95 1252, p99 4024, Avg 1048; 1888.2 inferences/s at concurrency 2.
ONLINE_MS = {
    "Client Send (ms)": 0.057, "Network+Server Send/Recv (ms)": 0.296,
    "Server Queue (ms)": 0.244, "Server Compute Input (ms)": 0.035,
    "Server Compute Infer (ms)": 0.333, "Server Compute Output (ms)": 0.081,
    "Client Recv (ms)": 0.0, "p50 latency (ms)": 0.979, "p90 latency (ms)": 1.125,
    "p95 latency (ms)": 1.252, "p99 latency (ms)": 4.024, "avg latency (ms)": 1.048,
}


def test_a_closed_loop_csv_is_read_into_every_column_in_milliseconds():
    row = perf_analyzer.parse_csv(ONLINE_CSV, Row(1, 2, "none"))
    assert {k: row[k] for k in ONLINE_MS} == pytest.approx(ONLINE_MS, abs=1e-12)
    assert (row["Batch"], row["Concurrency"], row[SHARED_MEMORY]) == (1, 2, "none")
    assert (row[THROUGHPUT], row[REQUESTS]) == (1888.2, 1888.2)
    # the reference documents' average: 57 + 296 + 244 + 35 + 333 + 81 + 0 = 1046 us
    assert row[COMPONENT_SUM] == pytest.approx(1.046, abs=1e-12)
    # -b 4: perf_analyzer's inferences are samples, its requests a quarter of them
    four = perf_analyzer.parse_csv(ONLINE_CSV, Row(4, 2, "system"))
    assert (four[THROUGHPUT], four[REQUESTS]) == (1888.2, pytest.approx(472.05))
    assert four[SHARED_MEMORY] == "system"
    # a batch inside the tensors (an ensemble, sent at -b 1): its inferences are requests
    inside = perf_analyzer.parse_csv(ONLINE_CSV, Row(4, 2, "system", shapes=(("k", (8,)),)))
    assert (inside[THROUGHPUT], inside[REQUESTS]) == (pytest.approx(7552.8), 1888.2)


def test_the_rate_scenarios_csv_has_the_offered_rate_where_the_concurrency_was():
    """200 requests/s offered, 216.182 answered: no concurrency column, p99 1391 us."""
    row = perf_analyzer.parse_csv((DATA / "rate_200.csv").read_text(),
                                  Row(1, 0, "none", rate=200.0, distribution="poisson"))
    assert row["Concurrency"] == 0 and row[THROUGHPUT] == 216.182
    assert (row["p99 latency (ms)"], row["avg latency (ms)"]) == (1.391, 0.92)
    assert row[COMPONENT_SUM] == pytest.approx((128 + 228 + 199 + 23 + 289 + 50 + 0) / 1000)


def test_a_csv_of_other_than_one_row_is_refused():
    header = ONLINE_CSV.splitlines()[0]
    with pytest.raises(perf_analyzer.PerfError, match="expected one measurement row"):
        perf_analyzer.parse_csv(header + "\n", Row(1, 2, "none"))
    with pytest.raises(perf_analyzer.PerfError, match="got 2"):
        perf_analyzer.parse_csv(ONLINE_CSV + ONLINE_CSV.splitlines()[1] + "\n",
                                Row(1, 2, "none"))


def test_the_window_spread_is_the_larger_of_throughput_and_latency_over_the_last_three():
    """Online, windows 2-4: throughput 1919.02, 1796.75, 1948 (spread 151.25 / 1887.92 =
    8.01 %), average latency 1028, 1103, 1017 us (86 / 1049.33 = 8.20 %): 8.2. The unsettled
    level's windows 8-10: 5267.13, 6199.14, 4926.56 (1272.58 / 5464.28 = 23.29 %) and 748,
    635, 801 us (166 / 728 = 22.80 %): 23.29."""
    assert perf_analyzer.window_spread(ONLINE_OUT) == 8.2
    assert perf_analyzer.window_spread(UNSETTLED_OUT) == 23.29
    two = "\n".join(line for line in ONLINE_OUT.splitlines() if "Pass [1]" not in line
                    and "Pass [2]" not in line)
    assert np.isnan(perf_analyzer.window_spread(two))


def test_real_counts_of_one_client_are_no_foreign_requests():
    """Online: 5,771 sent and answered; the rate level: 234 each. The rate level's edges: at
    200/s and p99 1.391 ms, ceil(0.28) + 1 = 2 requests in flight and ceil(216.2 x 0.002) = 1
    ending during the statistics query, at each of the kept windows' 6 edges: 18."""
    online = perf_analyzer.parse_csv(ONLINE_CSV, Row(1, 2, "none"))
    assert perf_analyzer.foreign_requests(ONLINE_OUT, Row(1, 2, "none"), online) == 0
    rate_out = (DATA / "rate_200.stdout").read_text()
    row = Row(1, 0, "none", rate=200.0, distribution="poisson")
    measured = perf_analyzer.parse_csv((DATA / "rate_200.csv").read_text(), row)
    assert perf_analyzer.foreign_requests(rate_out, row, measured) == 0
    more = rate_out.replace("Successful request count: 234", "Successful request count: {}")
    assert perf_analyzer.foreign_requests(more.format(234 + 18), row, measured) == 0
    assert perf_analyzer.foreign_requests(more.format(234 + 19), row, measured) == 1


RUN = {"key": {"model": "toy"},
       "model": {"inputs": [{"name": "x", "dtype": "FP32", "dims": [4]}],
                 "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]}],
                 "online": {"measurement_request_count": 40}},
       "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 300,
                "stability_percentage": 10, "max_trials": 10, "attempts": 2,
                "on_unstable": "record"}}


class FakeServer(SimpleNamespace):
    """What perf_analyzer.measure asks of a server, none running."""

    def __init__(self):
        super().__init__(install=SimpleNamespace(perf_analyzer=Path("perf_analyzer")),
                         version="", grpc_url="localhost:1", http_url="localhost:2", env={},
                         keep_fds=(), served_name=lambda name: name)

    def ensure_alive(self):
        pass


def _perf_analyzer_settling_at(settles: int, ran: list):
    """A stand-in for run_client: the first `settles - 1` runs do not settle (the real
    unsettled output), the next writes the online level's CSV with its real output;
    `settles` 0: only a run without the stability criterion (-s ANY_SPREAD) gives one."""
    def run(server, cmd, timeout_s=None, memory_limit=None):
        ran.append(cmd)
        flag = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("-")}
        settled = len(ran) == settles or flag["-s"] == str(perf_analyzer.ANY_SPREAD)
        if settled:
            Path(flag["-f"]).write_text(ONLINE_CSV)
            return subprocess.CompletedProcess(cmd, 0, ONLINE_OUT, "")
        return subprocess.CompletedProcess(cmd, 99, UNSETTLED_OUT, "")
    return run


@pytest.mark.parametrize("settles, stable, counts", [
    (1, True, ["40"]),  # settles at once
    (2, True, ["40", "80"]),  # the retry doubles the window
    (0, False, ["40", "80", "80"]),  # never: once more at the last length, any spread
])
def test_a_level_that_never_settles_is_kept_flagged_unstable_with_its_spread(
        tmp_path, monkeypatch, settles, stable, counts):
    ran = []
    monkeypatch.setattr(perf_analyzer, "run_client", _perf_analyzer_settling_at(settles, ran))
    with open(tmp_path / "perf.log", "w") as log:
        row = perf_analyzer.measure(RUN, "online", FakeServer(), Row(1, 2, "none"),
                                    tmp_path / "data.json", tmp_path, log)
    assert [c[c.index("--measurement-request-count") + 1] for c in ran] == counts
    assert row[STABLE] is stable
    assert row[WINDOW_SPREAD] == 8.2 and row[THROUGHPUT] == 1888.2 and row[FOREIGN] == 0
    if not stable:
        assert [c[c.index("-s") + 1] for c in ran] == ["10", "10",
                                                       str(perf_analyzer.ANY_SPREAD)]


def test_a_level_that_never_settles_fails_its_step_where_the_settings_say_so(
        tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(perf_analyzer, "run_client", _perf_analyzer_settling_at(0, ran))
    run = {**RUN, "perf": {**RUN["perf"], "on_unstable": "fail"}}
    with open(tmp_path / "perf.log", "w") as log, \
            pytest.raises(perf_analyzer.PerfError, match="found no stable online measurement"):
        perf_analyzer.measure(run, "online", FakeServer(), Row(1, 2, "none"),
                              tmp_path / "data.json", tmp_path, log)
    assert len(ran) == 2


# The export's 8 requests (ns since the epoch, less 1796612898e9): two sent before the kept
# windows begin (187161460), then six: sent 187641055, 540281366, 555532939, 898434263,
# 918105169, 1253984715; first response 188537839, 541078793, 556336531, 899208528,
# 918955794, 1254836893.
KEPT_MS = [0.896784, 0.797427, 0.803592, 0.774265, 0.850625, 0.852178]


def test_the_export_is_read_for_the_kept_windows_alone():
    """Latency: first response less send, in ms; the sends span 1253984715 - 187641055 ns
    = 1.06634366 s, first send to last response 1254836893 - 187641055 = 1.067195838 s."""
    latencies, sending, answering = tail.request_latencies(DATA / "rate_200_export.json")
    assert latencies.tolist() == pytest.approx(KEPT_MS, abs=1e-9)
    assert (sending, answering) == pytest.approx((1.06634366, 1.067195838), abs=1e-12)


def test_the_rate_levels_sent_and_achieved_rates():
    """Sent: the 5 intervals between 6 sends over their 1.06634366 s (4.689/s); achieved:
    6 answered from the first send to the last answer, 1.067195838 s (5.622/s)."""
    from deploybench.sweeps.open_loop import arrival_rates

    sent, achieved = arrival_rates(*tail.request_latencies(DATA / "rate_200_export.json"))
    assert sent == pytest.approx(5 / 1.06634366, rel=1e-9)
    assert achieved == pytest.approx(6 / 1.067195838, rel=1e-9)


def test_the_percentiles_of_the_kept_requests():
    """Sorted: 0.774265, 0.797427, 0.803592, 0.850625, 0.852178, 0.896784 ms. p50: halfway
    between the third and fourth, 0.8271085; p90 at rank 4.5: 0.852178 + 0.5 x 0.044606 =
    0.874481 (linear interpolation, as perf_analyzer's own percentiles are not: they are
    its windows'); each rounded to 4 decimals."""
    found = tail.percentiles(np.array(KEPT_MS))
    assert found["p50"]["value"] == 0.8271 and found["p90"]["value"] == 0.8745
    assert found["p99.9"]["value"] == round(0.852178 + 0.995 * 0.044606, 4)  # rank 4.995
    # the intervals' ends are requests (tail.order_ranks, Binomial(6, q)): p50 the fastest
    # and the slowest (1/64 of samples miss either); p90 and p95 above the fourth, p99
    # above the fifth, p99.9 above its own value (the slowest, 0.896784, widened to it);
    # six requests bound none of these from above
    assert found["p50"]["ci95"] == [0.7743, 0.8968]
    assert found["p90"]["ci95"] == found["p95"]["ci95"] == [0.8506, None]
    assert found["p99"]["ci95"] == [0.8522, None]
    assert found["p99.9"]["ci95"] == [found["p99.9"]["value"], None]


def _fake_runs(outcomes: list, ran: list):
    """run_client answering each call with the next of `outcomes`: an exception to raise,
    an exit code (the online level's real output; its CSV written where it is 0 and the
    outcome is not "no csv"), recording (cmd, timeout_s, memory_limit)."""
    def run(server, cmd, timeout_s=None, memory_limit=None):
        ran.append((cmd, timeout_s, memory_limit))
        outcome = outcomes[len(ran) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome == 0:
            Path(cmd[cmd.index("-f") + 1]).write_text(ONLINE_CSV)
        code = 0 if outcome == "no csv" else outcome
        return subprocess.CompletedProcess(cmd, code, ONLINE_OUT if code == 0 else "", "")
    return run


def measure_with(tmp_path, monkeypatch, outcomes, export=None, timeout_s=None):
    ran = []
    monkeypatch.setattr(perf_analyzer, "run_client", _fake_runs(outcomes, ran))
    with open(tmp_path / "perf.log", "w") as log:
        try:
            return perf_analyzer.measure(RUN, "online", FakeServer(), Row(1, 2, "none"),
                                         tmp_path / "d.json", tmp_path, log, export=export,
                                         timeout_s=timeout_s), ran
        finally:
            ran.append((tmp_path / "perf.log").read_text())


def test_an_export_past_its_memory_is_dropped_and_the_level_measured_again(tmp_path,
                                                                           monkeypatch):
    """The run with the export is watched at export_limit("online") and killed past it: the
    same attempt again without the export, the row saying why (3 GiB, 28 bytes a request)."""
    monkeypatch.setattr(perf_analyzer, "export_limit", lambda scenario: {"online": 7}[scenario])
    row, ran = measure_with(tmp_path, monkeypatch, [perf_analyzer.MemoryExceeded(3 * 2**30), 0],
                            export=tmp_path / "e.json", timeout_s=9.0)
    (first, t1, limit1), (second, t2, limit2), log = ran
    assert "--profile-export-file" in first and "--profile-export-file" not in second
    assert (t1, limit1, t2, limit2) == (9.0, 7, 9.0, None)
    assert first[first.index("--measurement-request-count") + 1] == second[
        second.index("--measurement-request-count") + 1] == "40"
    assert row[perf_analyzer.EXPORT_DROPPED] == perf_analyzer.export_dropped(
        RUN, Row(1, 2, "none"), 3 * 2**30)
    assert "28 bytes" in row[perf_analyzer.EXPORT_DROPPED] and row[STABLE] is True
    assert f"[killed: {row[perf_analyzer.EXPORT_DROPPED]}]" in log


def test_a_level_past_its_time_is_a_timeout_not_retried(tmp_path, monkeypatch):
    late = subprocess.TimeoutExpired(["pa"], 5.0, "some windows\n", "")
    with pytest.raises(perf_analyzer.PerfTimeout, match=r"did not finish the online level "
                       r"at batch 1, rate 0/s within 5 s"):
        measure_with(tmp_path, monkeypatch, [late], timeout_s=5.0)
    text = (tmp_path / "perf.log").read_text()
    assert "some windows\n[no result within 5 s: killed]" in text and text.count("$ ") == 1


def test_perf_analyzer_killed_is_named_at_once_with_its_exit_code(tmp_path, monkeypatch):
    with pytest.raises(perf_analyzer.PerfDeath, match=r"perf_analyzer was killed by SIGKILL, "
                       r"on the online measurement at batch 1, concurrency 2, none shared "
                       r"memory") as died:
        measure_with(tmp_path, monkeypatch, [-9, 0])
    assert died.value.exit_code == -9


def test_an_exit_without_a_csv_is_a_failed_attempt(tmp_path, monkeypatch):
    """Exit code 0 without a CSV is no measurement: the next attempt's row is kept."""
    row, ran = measure_with(tmp_path, monkeypatch, ["no csv", 0])
    assert len(ran) == 3 and row[THROUGHPUT] == 1888.2
    assert "[attempt 1/2 failed, exit code 0]" in ran[-1]
