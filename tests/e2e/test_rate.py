"""The rate scenario (open loop) through the real Snakemake, Triton and perf_analyzer on
the tiny TFT: Poisson arrivals achieved as offered below saturation, every request's
percentiles agreeing with perf_analyzer's own, the maximum rate within the budget bracketed
by a level within it and one beyond, the batches Triton formed, the report's section."""

import json
import shutil

import pandas as pd
import PIL.Image
import pytest
import yaml

from deploybench.records.tables import TAIL_REQUESTS
from deploybench.sweeps import open_loop
from deploybench.triton import config as triton_config
from testkit.workflow import ROOT, TINY, copy_build, snakemake

RUN = "results/tft-tiny/cpu/onnx_fp32"
RATE = {"batch_size": 1, "rates": [50, 100, 6000], "distribution": "poisson",
        "p99_budget_ms": 20, "bisection_steps": 1, "min_requests": 150, "min_window_ms": 500,
        "level_timeout_s": 15}  # a level that finishes takes 5-7 s; a saturated one, more


@pytest.fixture(scope="module")
def rated(tiny_build, tmp_path_factory):
    """tft-tiny's onnx configuration with a rate section (a copy of the test models), in a
    copy of the tiny build: the rate step runs, and the steps the perf settings feed."""
    work = copy_build(tiny_build, tmp_path_factory.mktemp("rate") / "work")
    models = work / "models"
    shutil.copytree(ROOT / "tests/config/models", models)
    tiny = yaml.safe_load((models / "tft-tiny.yaml").read_text())
    (models / "tft-tiny.yaml").write_text(yaml.safe_dump({**tiny, "rate": RATE}))
    extra = work / "rate.yaml"
    # one attempt of three windows: a saturated level settles never, and is kept flagged
    extra.write_text(yaml.safe_dump({"models_dir": str(models),
                                     "perf_overrides": {"cpu": {"attempts": 1,
                                                                "max_trials": 3}}}))
    # the rate step and the report alone: the other steps' settings changed (their params
    # hold the model's config), but not what they measure
    snakemake(work, f"{RUN}/README.md", "--configfile", str(TINY), str(extra),
              "--rerun-triggers", "mtime", "input")
    return work


def test_poisson_arrivals_are_achieved_as_offered_below_saturation(rated):
    table = pd.read_csv(rated / RUN / "rate.csv")
    assert set(table["Distribution"]) == {"poisson"}
    kept_up = table[table[open_loop.OFFERED] <= 100]
    assert (kept_up[TAIL_REQUESTS] >= RATE["min_requests"]).all(), kept_up
    # what was answered is what arrived; what arrived, a Poisson draw of the offered rate
    # (150-200 requests: within about three standard deviations)
    answered = kept_up[open_loop.ACHIEVED] / kept_up[open_loop.SENT]
    assert len(kept_up) == 2 and answered.between(0.95, 1.05).all(), kept_up
    drawn = kept_up[open_loop.SENT] / kept_up[open_loop.OFFERED]
    assert drawn.between(0.75, 1.25).all(), kept_up
    # twice what the tiny model answers on 2 cores (about 3,000/s): beyond the budget,
    # measured or not finished in time
    saturated = table[table[open_loop.OFFERED] == 6000].iloc[0]
    assert not saturated[open_loop.WITHIN], saturated
    measured = table.dropna(subset=[open_loop.ACHIEVED])
    assert (measured["Inferences/Second"] == measured[open_loop.ACHIEVED]).all()  # batch 1
    command = (rated / RUN / "logs/rate_perf_analyzer.log").read_text()
    assert "--request-distribution poisson" in command and "--async" in command


def test_every_requests_percentiles_agree_with_perf_analyzers(rated):
    """The export's requests are those of perf_analyzer's kept windows: its p50 and p90
    within the level's window spread (and 10 %) of perf_analyzer's, its p99 within the
    95 % interval widened as much; the intervals hold their percentile."""
    table = pd.read_csv(rated / RUN / "rate.csv").dropna(subset=[open_loop.EVERY["p99"]])
    assert len(table) >= 2  # a level beyond saturation may not finish in time
    for _, row in table.iterrows():
        slack = max(row["window spread (%)"], 10) / 100
        for q in ("p50", "p90"):
            ours, theirs = row[open_loop.EVERY[q]], row[f"{q} latency (ms)"]
            assert abs(ours - theirs) <= slack * theirs + 0.05, (q, row)
        low, high = row[open_loop.P99_CI[0]], row[open_loop.P99_CI[1]]
        # no upper end where fewer than 368 requests lie in the kept windows (0.99^368 < 0.025)
        assert pd.isna(high) == (row["Requests"] < 368), row
        high = float("inf") if pd.isna(high) else high
        assert low <= row[open_loop.EVERY["p99"]] <= high, row
        assert low * (1 - slack) - 0.05 <= row["p99 latency (ms)"] <= high * (1 + slack) + 0.05
    levels = json.loads((rated / RUN / "rate.json").read_text())["levels"]
    for level in (lv for lv in levels if "error" not in lv):
        values = [level["percentiles_ms"][f"p{q:g}"]["value"] for q in (50, 90, 95, 99, 99.9)]
        assert values == sorted(values), level


def test_the_maximum_rate_is_bracketed_by_a_level_within_and_one_beyond(rated):
    result = json.loads((rated / RUN / "rate.json").read_text())
    found = result["max_rate_within_budget"]
    table = pd.read_csv(rated / RUN / "rate.csv").set_index(open_loop.OFFERED)
    low, high = found["bracket"]
    assert found["bracketed"] and low < high, found
    assert table.loc[low, open_loop.WITHIN] and not table.loc[high, open_loop.WITHIN]
    assert table.loc[low, open_loop.EVERY["p99"]] <= RATE["p99_budget_ms"]
    # every level measured between them was bisected: none within the budget above low
    assert not table[(table.index > low)][open_loop.WITHIN].any()
    assert len(table) == len(RATE["rates"]) + RATE["bisection_steps"]


def test_the_batches_triton_formed_are_counted_per_level(rated):
    """Each level's executions by batch size: every request of its kept windows was in
    one of them (the counts also hold perf_analyzer's earlier windows), none above the
    deployment's max batch."""
    levels = json.loads((rated / RUN / "rate.json").read_text())["levels"]
    max_batch = triton_config.read(rated / RUN / "model_repository/tft-tiny/config.pbtxt") \
        .max_batch_size
    for level in (lv for lv in levels if "error" not in lv):
        formed = {int(b): n for b, n in level["executions_by_batch"].items()}
        assert sum(b * n for b, n in formed.items()) >= level["requests"], level
        assert max(formed) <= max_batch


def test_the_report_shows_the_rate_section_and_its_plot(rated):
    readme = (rated / RUN / "README.md").read_text()
    assert "## Rate scenario (open loop)" in readme
    assert "Maximum rate with p99 within 20 ms" in readme
    assert "Executions by the batch size" in readme
    with PIL.Image.open(rated / RUN / "plots/rate_latency.png") as image:
        assert image.width > 500


def test_a_level_that_does_not_finish_in_time_counts_as_beyond_the_budget(rated, tmp_path):
    """A level perf_analyzer does not finish within rate.level_timeout_s is killed and kept
    as beyond the budget (the server drained before the next one), with its host load:
    the step goes on and writes the table, never losing the other levels."""
    work = tmp_path / "work"
    shutil.copytree(rated, work, symlinks=True)
    tiny = yaml.safe_load((work / "models/tft-tiny.yaml").read_text())
    # windows of 2.5 s at 20 requests/s: no level finishes in one second
    (work / "models/tft-tiny.yaml").write_text(yaml.safe_dump(
        {**tiny, "rate": {**RATE, "rates": [20, 40], "level_timeout_s": 1}}))
    extra = work / "killed.yaml"
    extra.write_text(yaml.safe_dump({"models_dir": str(work / "models"),
                                     "perf_overrides": {"cpu": {"attempts": 1,
                                                                "max_trials": 3}}}))
    snakemake(work, f"{RUN}/rate.csv", "--configfile", str(TINY), str(extra))
    table = pd.read_csv(work / RUN / "rate.csv")
    assert list(table[open_loop.OFFERED]) == [20, 40]
    assert not table[open_loop.WITHIN].any() and table[open_loop.ACHIEVED].isna().all()
    result = json.loads((work / RUN / "rate.json").read_text())
    assert all("within 1 s" in level["error"] and "host_load" in level
               for level in result["levels"]), result["levels"]
    assert result["max_rate_within_budget"]["rate"] is None
