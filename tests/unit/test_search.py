"""The configuration search (deploybench.search, rules/search.smk): point names and
settings, the checks of a search's values, the strategies on given results, and real
Snakemake builds of a tiny search through the real Triton and perf_analyzer."""

import json
import math
import re

import pytest

from deploybench import search
from deploybench.records import formats
from deploybench.reporting.search_report import summary
from deploybench.settings.config import ConfigError
from deploybench.settings.resolve import Settings
from deploybench.steps.search import search_point
from deploybench.sweeps import closed_loop
from deploybench.triton.install import InstallMissing
from deploybench.triton.perf_failures import PerfError
from deploybench.triton.server import ServerError
from testkit.workflow import main_config

TRITON = {"instances": 1, "max_queue_delay_us": 100, "preferred_batch_sizes": [4, 8],
          "max_batch_size": 8}
MODEL = {"triton": TRITON, "offline": {"batch_sizes": [1, 4, 8], "measurement_request_count": 5},
         "online": {"batch_size": 1, "concurrency": [1, 2], "measurement_request_count": 5}}


# --- names, settings, checks (no server) -------------------------------------------------

def test_a_point_name_is_made_of_its_values_and_back():
    values = {"instances": 2, "max_queue_delay_us": 100, "preferred_batch_sizes": [512, 1024],
              "max_batch_size": 1024, "gpus": 2}
    assert search.point_name(values) == "i2-q100-p512_1024-m1024-g2"
    assert search.parse_point("i2-q100-p512_1024-m1024-g2") == values
    assert re.fullmatch(search.POINT, "i2-g2")  # the Snakefile's wildcard constraint
    assert search.point_name({"max_queue_delay_us": 0}) == "q0"  # only the searched ones
    for bad in ("x2", "i2-", "i", "q1-i2", "i2_3", "i02", "g2-i2", "g1_2"):
        with pytest.raises(ConfigError, match="search point"):
            search.parse_point(bad)


def test_adding_a_value_adds_names_and_keeps_the_others():
    before = search.grid({"instances": [1, 2], "max_queue_delay_us": [100, 2000]})
    after = search.grid({"instances": [1, 2], "max_queue_delay_us": [100, 2000, 500]})
    assert before == ["i1-q100", "i1-q2000", "i2-q100", "i2-q2000"]
    assert set(before) < set(after) and sorted(set(after) - set(before)) == ["i1-q500", "i2-q500"]


def test_a_point_runs_the_configuration_with_its_values():
    s = {"instances": [1, 2], "max_batch_size": [8, 2], "offline": {"batch_sizes": [4, 8]},
         "online": {"concurrency": [4]}}
    model = search.point_model(MODEL, s, "i2-m2")
    assert model["triton"] == {**TRITON, "instances": 2, "max_batch_size": 2}
    assert model["offline"]["batch_sizes"] == [2]  # none fits: the point's max batch
    assert search.point_model(MODEL, s, "i1-m8")["offline"]["batch_sizes"] == [4, 8]
    assert model["online"] == {**MODEL["online"], "concurrency": [4]}
    assert MODEL["triton"]["instances"] == 1  # the configuration's settings untouched
    with pytest.raises(ConfigError, match="not a point of this search; its points: i1-m8, "):
        search.point_model(MODEL, s, "i3-m8")


@pytest.mark.parametrize("values, message", [
    ({"preferred_batch_sizes": [[4], [16]]},
     r"preferred_batch_sizes \[16\]: \[16\] exceed every max batch size searched \(8\); "
     "valid preferred batch sizes are 1 to 8"),
    ({"max_batch_size": [8, 4], "preferred_batch_sizes": [[16]]},
     r"\[16\] exceed every max batch size searched \(8, 4\)"),
    ({"max_batch_size": [8, 1], "online": {"batch_size": 2}},
     r"max_batch_size \[1\] below the online batch size 2 .*valid max batch sizes are 2"),
    ({"instances": [1], "offline": {"shared_memory": ["system", "cuda"]}},
     "'cuda' needs a GPU key; this key is cpu"),
    ({"instances": [1], "strategy": "random"}, "strategy 'random' is unknown; valid strategies: "
     "grid, descent"),
    ({"instances": [1], "p99_budget_ms": 0}, "p99_budget_ms '0' must be"),
    ({"instances": [1], "rank": "median"}, "rank 'median' is unknown; valid ranks: "
     "interpolated, measured"),
    ({"strategy": "grid"}, "lists no values to try"),
])
def test_a_bad_search_is_refused_naming_the_value(values, message):
    with pytest.raises(ConfigError, match=message):
        search.check(values, MODEL, "model 'm'", "cpu")


def test_a_combination_only_some_points_cannot_load_is_left_to_triton():
    # [8] exceeds max batch 4 only: that point fails at load, the others are measured
    search.check({"max_batch_size": [8, 4], "preferred_batch_sizes": [[8]]}, MODEL, "m", "cpu")


def test_the_configs_searches(settings):
    tiny = search.configured(settings, "tft-tiny", "cpu", "onnx")
    assert search.grid(tiny) == ["i1-q100-m8", "i1-q2000-m8", "i2-q100-m8", "i2-q2000-m8"]
    with pytest.raises(ConfigError, match="has no search on GPU key 'h100'"):
        search.required(Settings(main_config(models_dir="config/models")), "bert", "h100",
                        "onnx")
    full = Settings(main_config(models_dir="config/models"))
    h100 = search.required(full, "tft", "h100", "aoti-cg")
    lists = search.lists(h100)
    assert len(lists["instances"]) >= 3 and len(lists["max_queue_delay_us"]) >= 3
    assert len(lists["preferred_batch_sizes"]) == 2 and len(search.grid(h100)) == 18
    triton = full.run("tft", "h100", "aoti-cg", "fp16")["model"]["triton"]
    assert search.reference_point(h100, triton) == "i2-q1-p512_1024"  # the reference's own values
    run = search.point_run(full, "tft", "h100", "aoti-cg", "fp16", "i4-q100-p512_1024")
    assert run["model"]["triton"]["instances"] == 4 and run["search_point"]["name"]
    assert run["search_point"]["scenarios"] == ["online"]  # the H100 search: online only
    assert "offline" not in search.point_step_spec(run, "search_point")["model"]
    tiny_run = search.point_run(settings, "tft-tiny", "cpu", "onnx", "fp32", "i2-q100-m8")
    assert tiny_run["search_point"]["scenarios"] == ["online", "offline"]  # the default
    assert tiny_run["model"]["offline"]["batch_sizes"] == [4]
    assert not search.configured(full, "tft", "cpu", "onnx")  # the GPU's search only
    dlrm = Settings(main_config(models_dir="config/models"))
    dlrm.models["dlrm"]["search"] = {"instances": [1, 2]}
    with pytest.raises(ConfigError, match="'hps-onnx' of model 'dlrm' cannot be searched"):
        search.required(dlrm, "dlrm", "cpu", "hps-onnx")


def test_the_budget_and_strategy_come_from_the_command_line():
    config = main_config(search={"strategy": "descent", "p99_budget_ms": 7.5,
                                 "rank": "measured"})
    tiny = search.configured(Settings(config), "tft-tiny", "cpu", "onnx")
    assert tiny["strategy"] == "descent" and tiny["p99_budget_ms"] == 7.5
    assert tiny["rank"] == "measured"
    assert search.configured(Settings(main_config()), "tft-tiny", "cpu", "onnx")["rank"] == (
        "interpolated")


def _result(throughput, p99=1.0, status=search.OK):
    return {"status": status, "online": [{"concurrency": 1, "throughput": throughput,
                                          "p99_ms": p99}]}


def _levels(*levels):
    """A measured point of (concurrency, throughput, p99 ms) levels."""
    return {"status": search.OK, "online": [{"concurrency": c, "throughput": t, "p99_ms": p}
                                            for c, t, p in levels]}


def test_the_throughput_at_the_budget_is_interpolated_between_two_measured_levels():
    # 16 within 25 ms, 32 beyond it: 40% of the way in p99 is 40% of the way in throughput
    point = _levels((32, 50_000, 30.0), (16, 35_000, 20.0), (64, 60_000, 40.0))
    assert search.at_budget(point, 25, "measured") == point["online"][1]
    assert search.at_budget(point, 24, "interpolated") == {
        "throughput": pytest.approx(41_000), "p99_ms": 24, "between": [16, 32]}
    # a p99 a millisecond either side of the budget moves the score by a little, not a step
    over, under = (_levels((16, 35_000, 20.0), (32, 50_000, p)) for p in (25.5, 24.5))
    assert search.score(under, 25, "measured") / search.score(over, 25, "measured") == (
        pytest.approx(50 / 35))
    assert search.score(over, 25) == pytest.approx(35_000 + 15_000 * 5 / 5.5)  # 48,636
    assert search.score(under, 25) / search.score(over, 25) < 1.03
    # nothing below the first level nor beyond the last; a measured level higher than the
    # interpolation wins (throughput falling past the budget)
    assert search.at_budget(_levels((16, 35_000, 30.0), (32, 50_000, 40.0)), 25) is None
    assert search.at_budget(_levels((16, 35_000, 10.0), (32, 50_000, 20.0)), 25) == {
        "concurrency": 32, "throughput": 50_000, "p99_ms": 20.0}
    falling = _levels((16, 35_000, 10.0), (32, 30_000, 40.0))
    assert search.at_budget(falling, 25)["concurrency"] == 16
    # the best crossing counts where the p99 comes back within the budget
    zigzag = _levels((16, 35_000, 20.0), (32, 40_000, 30.0), (64, 52_000, 24.0),
                     (128, 70_000, 26.0))
    assert search.at_budget(zigzag, 25)["between"] == [64, 128]
    assert search.score(zigzag, 25) == pytest.approx(52_000 + 18_000 / 2)
    assert search.at_budget(zigzag, None)["concurrency"] == 128  # no budget: the peak


def test_the_best_point_is_the_fastest_within_the_budget():
    results = {"a": _result(100, p99=30), "b": _result(80, p99=5),
               "c": _result(0, status=search.FAILED)}
    assert search.best(results, 10) == "b" and search.best(results, None) == "a"
    assert search.best(results, 1) is None
    assert search.score(results["c"], None) == -math.inf


def test_the_search_readme_says_which_levels_a_score_comes_from():
    from deploybench.reporting.search_report import _within

    point = _levels((1, 950.0, 4.725), (4, 1751.0, 7.215))
    assert _within(point, 5, "interpolated") == (
        "≈1,038 inf/s at p99 5 ms, interpolated between concurrency 1 and 4; measured: "
        "950 inf/s at concurrency 1 (p99 4.72 ms)")
    assert _within(point, 5, "measured") == "950 inf/s at concurrency 1 (p99 4.72 ms)"
    assert _within(point, 8, "interpolated") == "1,751 inf/s at concurrency 4 (p99 7.21 ms)"
    assert _within(point, 4, "interpolated") == "none"


def test_descent_measures_fewer_points_and_finds_a_separable_optimum():
    s = {"instances": [1, 2, 4], "max_queue_delay_us": [1, 100, 1000],
         "preferred_batch_sizes": [[512, 1024], [1024]]}
    gain = {"instances": {1: 1.0, 2: 1.5, 4: 1.2}, "max_queue_delay_us": {1: 1.0, 100: 1.3,
            1000: 0.9}, "preferred_batch_sizes": {(512, 1024): 1.0, (1024,): 1.1}}

    def measure(name):
        v = search.parse_point(name)
        return _result(1000 * gain["instances"][v["instances"]]
                       * gain["max_queue_delay_us"][v["max_queue_delay_us"]]
                       * gain["preferred_batch_sizes"][tuple(v["preferred_batch_sizes"])])

    triton = {"instances": 2, "max_queue_delay_us": 1, "preferred_batch_sizes": [512, 1024]}
    visited, pick = search.descent(s, triton, measure, None)
    assert visited[0] == "i2-q1-p512_1024"  # the reference's configuration first
    assert pick == "i2-q100-p1024" == search.best({n: measure(n) for n in search.grid(s)}, None)
    assert len(visited) <= len(search.grid(s)) // 2


def test_a_failed_point_is_summarised_by_its_error_lines():
    reason = ("online: Triton failed to load model 'm' (tritonserver exit code 1):\n"
              'E1124 21:35:45.244014 26684 model_repository_manager.cc:1460] "Poll failed: '
              'dynamic batching preferred size must be <= max batch size for m"\n'
              "| a table | of options |\nerror: creating server: Internal - failed")
    assert summary(reason) == [
        "online: Triton failed to load model 'm' (tritonserver exit code 1):",
        '"Poll failed: dynamic batching preferred size must be <= max batch size for m"',
        "error: creating server: Internal - failed"]
    assert summary("online: perf_analyzer found no stable\nx\ny") == [
        "online: perf_analyzer found no stable", "x", "y"]


@pytest.mark.parametrize("error, recorded", [
    (ServerError("model 'm' did not load: out of memory"), True),
    (PerfError("perf_analyzer found no stable online measurement"), True),
    (InstallMissing("tritonserver binary '/x' does not exist"), False),
    (KeyError("throughput"), False),
])
def test_only_a_points_own_failure_is_recorded(tmp_path, monkeypatch, error, recorded):
    """A failure the point's values can cause is its recorded reason (the job succeeds); a
    missing server or a bug would fail every point alike, so it fails the job and leaves
    no point.json."""
    def online(*args):
        (tmp_path / "online.csv").write_text("partial")  # a failed run's leftovers
        raise error

    monkeypatch.setattr(closed_loop, "online", online)
    spec = {"search_point": {"name": "i2", "values": {"instances": 2}, "scenarios": ["online"]},
            "model": {"triton": TRITON}, "key": {"model": "m"}}
    repository = tmp_path / "model_repository"
    (repository / "m").mkdir(parents=True)
    (repository / "m/config.pbtxt").write_text('name: "m"\nmax_batch_size: 8\n')
    logs = [tmp_path / f"{n}.log" for n in ("op", "os", "np", "ns")]
    out, config = tmp_path / "point.json", tmp_path / "config.pbtxt"
    if recorded:
        search_point(spec, repository, tmp_path, tmp_path, out, config, *logs)
        result = json.loads(out.read_text())
        assert result["status"] == "failed" and result["scenario"] == "online"
        assert str(error) in result["reason"]
        # what the point served is kept beside it (its repository is not kept)
        assert config.read_text() == (repository / "m/config.pbtxt").read_text()
    else:
        with pytest.raises(type(error)):
            search_point(spec, repository, tmp_path, tmp_path, out, config, *logs)
        assert not out.exists()
    assert not (tmp_path / "online.csv").exists()  # no table that could pass for a result


def test_the_model_report_lists_the_searches_on_disk(tmp_path):
    from deploybench.reporting.model_report import _search_peak, searches_table

    folder = tmp_path / "results/m/h100/aoti-cg_fp16/search"
    folder.mkdir(parents=True)
    level = {"batch": 16, "concurrency": 64, "shared_memory": "none", "avg_ms": 5.0}
    (folder / "search.json").write_text(formats.text({
        "strategy": "grid", "points": ["i1", "i2"], "grid": ["i1", "i2"], "p99_budget_ms": 25,
        "winner": "i2", "reference": "i1", "rank": "measured",
        "results": {"i1": {"status": "ok", "online": [{**level, "throughput": 1000.0,
                                                      "p99_ms": 9.5}]},
                    "i2": {"status": "ok", "online": [{**level, "throughput": 2500.0,
                                                      "p99_ms": 12.25}]}}}))
    # a search kept in a dated set (its NOTES.md) is listed too; a stray one is not
    for where in ("h100/search-2026-11-25", "h100/stray"):
        kept = tmp_path / f"results/m/{where}/aoti-cg_fp16/search"
        kept.mkdir(parents=True)
        summary = json.loads((folder / "search.json").read_text())
        (kept / "search.json").write_text(formats.text({**summary, "strategy": "descent",
                                                      "points": ["i1"], "winner": "i1"}))
    (tmp_path / "results/m/h100/search-2026-11-25/NOTES.md").write_text("# a set\n")
    table = searches_table(tmp_path / "results/m/README.md")
    assert len(table) == 2
    row = table.iloc[0].to_dict()
    assert row["Search"] == "[aoti-cg_fp16](h100/aoti-cg_fp16/search/README.md)"
    assert row["Winner: online peak"] == "2,500 inf/s at 64, p99 12.25 ms"
    assert row["Reference's values: online peak"] == "1,000 inf/s at 64, p99 9.50 ms"
    assert row["Strategy"] == "grid, 2 of 2"
    assert row["Winner: within the budget"] == "2,500 inf/s at 64, p99 12.25 ms"
    assert _search_peak({"status": "ok", "online": [{**level, "throughput": 1.0,
                                                     "p99_ms": 30.0}]}, 25, "measured") == "none"
    assert _search_peak({"status": "failed"}, 25, "measured") == "failed"
    crossing = _levels((16, 1000.0, 20.0), (32, 2000.0, 30.0))
    assert _search_peak(crossing, 25, "interpolated") == "≈1,500 inf/s between 16 and 32, p99 25 ms"
    assert _search_peak(crossing, 25, "measured") == "1,000 inf/s at 16, p99 20.00 ms"
    row = table.iloc[1].to_dict()
    assert row["GPU"] == "h100" and row["Strategy"] == "descent, 1 of 2"
    assert row["Search"] == ("[search-2026-11-25/aoti-cg_fp16]"
                             "(h100/search-2026-11-25/aoti-cg_fp16/search/README.md)")
    assert row["Winner"] == "i1" and row["Winner: online peak"] == "1,000 inf/s at 64, p99 9.50 ms"
