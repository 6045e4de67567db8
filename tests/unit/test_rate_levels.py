"""The rate scenario's levels and its search, none against a server: a level's sent and
achieved rates, tail and verdict from perf_analyzer's real export (tests/data/perf_analyzer),
a level perf_analyzer gave nothing for, the rates offered as fractions of the online peak,
each level's windows, and the step's table and answer from levels a stand-in server gives."""

import contextlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from deploybench.records.tables import ACHIEVED, EVERY, OFFERED, P99_CI, SENT, THROUGHPUT, WITHIN
from deploybench.sweeps import level as sweep_level
from deploybench.sweeps import open_loop
from deploybench.triton import perf_analyzer
from deploybench.triton.perf_command import Row

DATA = Path(__file__).resolve().parents[1] / "data" / "perf_analyzer"
RATE = {"batch_size": 2, "distribution": "poisson", "p99_budget_ms": 20, "min_requests": 150,
        "min_window_ms": 500, "bisection_steps": 2, "rates": [50.0, 400.0]}
SPEC = {"key": {"model": "m", "gpu": "cpu", "backend": "onnx"},
        "backend": {"runner": "onnxruntime", "export": "onnx"},
        "model": {"rate": RATE, "triton": {"max_batch_size": 8},
                  "online": {"batch_size": 2}},
        "perf": {"attempts": 3, "max_trials": 10, "stability_percentage": 10}}


def test_a_level_is_offered_the_windows_its_requests_need():
    """min_requests 150 over three windows, a quarter more: 1.25 x 150 / 3 / 50 per s =
    1.25 s at 50/s; at 400/s 156 ms, so the 500 ms floor; one attempt."""
    at_50 = open_loop._windowed(SPEC, 50.0)
    assert at_50["model"]["rate"]["measurement_interval_ms"] == 1250
    assert at_50["model"]["rate"]["measurement_mode"] == "time_windows"
    assert open_loop._windowed(SPEC, 400.0)["model"]["rate"]["measurement_interval_ms"] == 500
    assert at_50["perf"]["attempts"] == 1 and SPEC["perf"]["attempts"] == 3


def test_rates_of_peak_are_fractions_of_the_highest_stable_online_level(tmp_path):
    """Stable levels peak at 1,000 inf/s (an unstable 1,400 is not a peak): 500 requests/s
    at batch 2; rates 0.5 and 1.2 of it: 250 and 600, to three figures."""
    online = tmp_path / "online.csv"
    pd.DataFrame({"Inferences/Second": [600.0, 1000.0, 1400.0],
                  "Stable": [True, True, False]}).to_csv(online, index=False)
    of_peak = {k: v for k, v in RATE.items() if k != "rates"} | {"rates_of_peak": [0.5, 1.2]}
    got = open_loop.offered(of_peak, online)
    assert got["rates"] == [250.0, 600.0] and got["online_peak_requests_per_s"] == 500.0
    pd.DataFrame({"Inferences/Second": [600.0], "Stable": [False]}).to_csv(online, index=False)
    with pytest.raises(ValueError, match="no stable level"):
        open_loop.offered({"batch_size": 2, "rates_of_peak": [0.5]}, online)
    assert open_loop.offered(RATE, None) is RATE  # rates given: as they are


@pytest.fixture
def stand_in(monkeypatch):
    """Serving replaced: executions counted, telemetry and host load quiet."""
    @contextlib.contextmanager
    def quiet(*args, **kwargs):
        yield SimpleNamespace(result={"contended": False})

    monkeypatch.setattr(sweep_level.telemetry, "Telemetry", quiet)
    monkeypatch.setattr(sweep_level, "HostLoad", quiet)
    monkeypatch.setattr(sweep_level, "executions_by_batch", lambda s, m: {2: 10})
    monkeypatch.setattr(sweep_level, "formed_since", lambda s, m, before: {2: 6})
    drained = []
    monkeypatch.setattr(open_loop, "_drain", lambda server, model: drained.append(model))
    return SimpleNamespace(pids=[], settings_changed=lambda: {}, drained=drained)


def test_a_level_from_perf_analyzers_real_export(tmp_path, stand_in, monkeypatch):
    """The kept windows' 6 requests: sent 5 / 1.06634366 s = 4.689/s, achieved 6 /
    1.067195838 s = 5.622/s, throughput 2 x that; p99 at rank 4.95 of the sorted latencies,
    0.852178 + 0.95 x 0.044606 = 0.8946 ms. Offered 5/s: within the budget (5.33 requests
    expected over the span, 5 sent, within a Poisson draw's spread)."""
    row = Row(2, 0, "none", "m", rate=5.0, distribution="poisson")
    measured = perf_analyzer.parse_csv((DATA / "rate_200.csv").read_text(), row)

    def measure(spec, scenario, server, row, data, work, log, export, timeout_s):
        if row.rate == 5.0:  # 1.25 x 150 / 3 requests at 5/s: 12.5-s windows
            assert spec["model"]["rate"]["measurement_interval_ms"] == 12500
            assert timeout_s == 120 + 3 * 10 * 12.5
        shutil.copy(DATA / "rate_200_export.json", export)
        return measured | {"Stable": True}

    monkeypatch.setattr(open_loop.perf_analyzer, "measure", measure)
    level, report = open_loop._level(SPEC, stand_in, row, tmp_path / "d.json", tmp_path,
                                     None, {"device": "cpu"}, budget=20)
    assert level[SENT] == pytest.approx(5 / 1.06634366)
    assert level[ACHIEVED] == pytest.approx(6 / 1.067195838)
    assert level[THROUGHPUT] == pytest.approx(2 * 6 / 1.067195838)
    assert level[EVERY["p99"]] == 0.8946 and level[WITHIN] is True
    assert (level["Requests"], level["Measured (s)"]) == (6, pytest.approx(1.067195838))
    assert level[OFFERED] == 5.0 and level["p99 latency (ms)"] == 1.391  # perf_analyzer's
    assert report["executions_by_batch"] == {2: 6} and report["requests"] == 6
    assert not (tmp_path / "export_r5.json").exists()  # read, then deleted
    # offered 200/s, the same requests: the load generator fell behind (213 expected)
    level, _ = open_loop._level(SPEC, stand_in, row._replace(rate=200.0),
                                tmp_path / "d.json", tmp_path, None, {"device": "cpu"}, 20)
    assert level[WITHIN] is False


def test_a_level_perf_analyzer_gave_nothing_for_is_beyond_the_budget(tmp_path, stand_in,
                                                                     monkeypatch):
    def refused(*args, **kwargs):
        raise perf_analyzer.PerfError("connections refused", exit_code=99)

    monkeypatch.setattr(open_loop.perf_analyzer, "measure", refused)
    level, report = open_loop._level(SPEC, stand_in, Row(2, 0, "none", "m", rate=6000.0),
                                     tmp_path / "d.json", tmp_path, None,
                                     {"device": "cpu"}, budget=20)
    assert level[WITHIN] is False and level["Stable"] is False and level[OFFERED] == 6000.0
    assert level[open_loop.FAILED] == ("made perf_analyzer fail (exit code 99: rate.json "
                                       "holds its error)")
    assert report["error"] == "connections refused" and stand_in.drained == ["m"]


def test_the_step_bisects_between_its_rates_and_writes_what_it_measured(tmp_path,
                                                                        monkeypatch):
    """A stand-in server answers up to 300 requests/s within 5 ms, beyond it at 900 ms:
    50 within, 400 beyond, then 225 (within) and 312.5 (beyond): the answer 225 requests/s,
    450 inferences/s at batch 2, bracketed by 312.5; rate.csv sorted by the offered rate."""
    @contextlib.contextmanager
    def warmed(*args):
        yield SimpleNamespace(), {"server": {"served_by": "python"}}, tmp_path / "d.json"

    def level(spec, server, row, data, work, log, prov, budget):
        slow = row.rate > 300
        found = {"Batch": row.batch, "Distribution": row.distribution, OFFERED: row.rate,
                 SENT: row.rate, ACHIEVED: row.rate, THROUGHPUT: row.rate * row.batch,
                 EVERY["p99"]: 900.0 if slow else 5.0, P99_CI[0]: 4.0, P99_CI[1]: 6.0,
                 WITHIN: not slow}
        return found, {"offered": row.rate}

    monkeypatch.setattr(open_loop.serving, "warmed_server", warmed)
    monkeypatch.setattr(open_loop.perf_analyzer, "warm_up", lambda *a: None)
    monkeypatch.setattr(open_loop, "_level", level)
    out_csv, out_json = tmp_path / "rate.csv", tmp_path / "rate.json"
    open_loop.rate(SPEC, tmp_path / "repo", tmp_path / "perf", [], out_csv, out_json,
                   tmp_path / "perf.log", tmp_path / "server.log")
    table = pd.read_csv(out_csv)
    assert table[OFFERED].tolist() == [50.0, 225.0, 312.5, 400.0]
    assert table[WITHIN].tolist() == [True, True, False, False]
    found = json.loads(out_json.read_text())["max_rate_within_budget"]
    assert (found["rate"], found["bracket"], found["throughput"]) == (225.0, [225.0, 312.5],
                                                                      450.0)
    assert found["beyond"] == "exceeded it (p99 900 ms)" and found["p99_ci95_ms"] == [4.0, 6.0]


def test_a_levels_report_and_what_it_asked_of_the_server(tmp_path, stand_in, monkeypatch):
    """The JSON's level: offered, requests, seconds to 3 decimals, percentiles, the batches
    formed since the level began, host load and telemetry; level_timeout_s where the model
    sets one; a level that ran out of time is said to."""
    row = Row(2, 0, "none", "m", rate=5.0, distribution="poisson")
    measured = perf_analyzer.parse_csv((DATA / "rate_200.csv").read_text(), row)
    asked = []
    monkeypatch.setattr(sweep_level, "formed_since", lambda s, m, before: asked.append(
        (s, m, before)) or {2: 6})

    def measure(spec, scenario, server, row, data, work, log, export, timeout_s):
        asked.append((scenario, server, timeout_s, log))
        shutil.copy(DATA / "rate_200_export.json", export)
        return measured | {"Stable": True}

    monkeypatch.setattr(open_loop.perf_analyzer, "measure", measure)
    spec = {**SPEC, "model": {**SPEC["model"], "rate": {**RATE, "level_timeout_s": 33}}}
    level, report = open_loop._level(spec, stand_in, row, tmp_path / "d.json", tmp_path,
                                     "LOG", {"device": "cpu"}, budget=20)
    assert asked == [("rate", stand_in, 33, "LOG"), (stand_in, "m", {2: 10})]
    assert level["Distribution"] == "poisson"
    assert (report["offered"], report["seconds"]) == (5.0, 1.067)
    assert report["percentiles_ms"]["p99"]["value"] == 0.8946
    assert report["host_load"]["contended"] is False and report["telemetry"] == {
        "contended": False}

    def late(*args, **kwargs):
        raise perf_analyzer.PerfTimeout("no answer in 33 s")

    monkeypatch.setattr(open_loop.perf_analyzer, "measure", late)
    level, report = open_loop._level(spec, stand_in, row, tmp_path / "d.json", tmp_path,
                                     None, {"device": "cpu"}, budget=20)
    assert level[open_loop.FAILED] == "did not finish in time" and level["Batch"] == 2
    assert report == {"offered": 5.0, "error": "no answer in 33 s",
                      "host_load": {"contended": False, "foreign_requests": None}}


def test_a_level_whose_kept_windows_got_no_answer_is_beyond_the_budget(tmp_path, stand_in,
                                                                        monkeypatch):
    """Far beyond saturation no request sent in the kept windows is answered before
    perf_analyzer stops (the main job's rate step on 2 cores, 2026-12-07, which failed the
    whole run): the level is beyond the budget with that reason, after the backlog drained,
    and the sweep goes on."""
    row = Row(2, 0, "none", "m", rate=466.0, distribution="poisson")
    text = (DATA / "rate_200_export.json").read_text()
    last = int(text.rsplit('"window_boundaries":[', 1)[1].split("]")[0].split(",")[-1])
    after = ",".join(str(last + i * 361_000_000) for i in range(1, 5))  # four more windows
    text = text.replace(text.rsplit('"window_boundaries":[', 1)[1].split("]")[0], after)
    measured = perf_analyzer.parse_csv((DATA / "rate_200.csv").read_text(), row)
    drained = []
    monkeypatch.setattr(open_loop, "_drain", lambda server, model: drained.append(model))
    monkeypatch.setattr(sweep_level, "formed_since", lambda *args: {})

    def measure(spec, scenario, server, row, data, work, log, export, timeout_s):
        export.write_text(text)
        return measured | {"Stable": True}

    monkeypatch.setattr(open_loop.perf_analyzer, "measure", measure)
    level, report = open_loop._level(SPEC, stand_in, row, tmp_path / "d.json", tmp_path,
                                     None, {"device": "cpu"}, budget=20)
    assert level[open_loop.FAILED] == "answered no request sent in its kept windows (a backlog)"
    assert level[WITHIN] is False and EVERY["p99"] not in level and drained == ["m"]
    assert "0 requests in the kept windows" in report["error"]
    assert not list(tmp_path.glob("export_*.json"))  # no export left to pass for a level's
    assert open_loop._why_beyond(level, 20) == level[open_loop.FAILED]
