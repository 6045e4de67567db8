"""Searches run by the real Snakemake on a copy of the tiny build: descent then grid share
their points, the winner's config parses, a new value builds only its points."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from deploybench import search
from testkit.workflow import ROOT, copy_build, planned_jobs, snakemake

RUN = "results/tft-tiny/cpu/onnx_fp32"
SEARCH = f"{RUN}/search"


# --- real Snakemake, Triton and perf_analyzer on the tiny model --------------------------

@pytest.fixture(scope="module")
def work(tiny_build, tmp_path_factory):
    """A copy of the tiny build: the search's points serve its converted model."""
    return copy_build(tiny_build, tmp_path_factory.mktemp("search") / "work")


def _summary(work: Path) -> dict:
    return json.loads((work / SEARCH / "search.json").read_text())


def test_descent_then_grid_share_their_points(work):
    """The descent measures at most the grid's points; the grid then measures only the
    points the descent did not, and both picks are reported."""
    snakemake(work, f"{SEARCH}/README.md", "--config", "search={strategy: descent}")
    descent = _summary(work)
    assert descent["strategy"] == "descent" and descent["reference"] == "i1-q100-m8"
    measured = descent["points"]
    assert measured[0] == "i1-q100-m8" and len(measured) <= 4
    readme = (work / SEARCH / "README.md").read_text()
    assert f"Strategy **descent**: {len(measured)} of the grid's 4 points measured" in readme

    plan = planned_jobs(snakemake(work, "-n", f"{SEARCH}/README.md"))
    assert plan == {"search_repository": 4 - len(measured), "search_point": 4 - len(measured),
                    "search_report": 1}
    snakemake(work, f"{SEARCH}/README.md")
    grid = _summary(work)
    assert grid["strategy"] == "grid" and len(grid["points"]) == 4
    assert all(r["status"] == "ok" for r in grid["results"].values())
    for point in grid["points"]:  # each measured point's tables beside its point.json
        assert (work / SEARCH / point / "online.csv").is_file()
        assert (work / SEARCH / point / "offline.csv").is_file()
        # and the config it served, with the point's values
        served = text_format.Parse((work / SEARCH / point / "config.pbtxt").read_text(),
                                   model_config_pb2.ModelConfig())
        values = search.parse_point(point)
        assert served.instance_group[0].count == values["instances"]
        assert served.max_batch_size == values["max_batch_size"]
        assert (served.dynamic_batching.max_queue_delay_microseconds
                == values["max_queue_delay_us"])
    # the descent's points are the grid's files: its pick scored on them
    budget = grid["p99_budget_ms"]
    assert grid["rank"] == descent["rank"] == "interpolated"
    ratio = (search.score(grid["results"][descent["best_within_budget"]], budget)
             / search.score(grid["results"][grid["best_within_budget"]], budget))
    print(f"descent: {len(measured)} of 4 points, its pick {descent['best_within_budget']} "
          f"at {ratio:.3f} of the grid's best {grid['best_within_budget']}")
    assert 0 < ratio <= 1
    bench = subprocess.run([sys.executable, str(ROOT / "scripts/benchmarks/bench_search.py"),
                            "tft-tiny", "cpu", "onnx", "fp32", "--directory", str(work)],
                           capture_output=True, text=True, check=True).stdout
    assert f"points measured: {len(measured)} of 4 = {len(measured) / 4:.2f}" in bench
    assert "descent / grid throughput within the budget: " in bench
    assert "Nothing to be done" in snakemake(work, "-n", f"{SEARCH}/README.md").stdout


def test_the_winner_config_parses_with_tritons_protobuf(work):
    winner = (work / SEARCH / "winner/config.pbtxt").read_text()
    config = text_format.Parse(winner, model_config_pb2.ModelConfig())
    chosen = search.parse_point(_summary(work)["winner"])
    assert config.name == "tft-tiny" and config.instance_group[0].count == chosen["instances"]
    assert config.dynamic_batching.max_queue_delay_microseconds == chosen["max_queue_delay_us"]
    readme = (work / SEARCH / "README.md").read_text()
    # linked, not inlined: the winner's config and each point's, every link to a file there
    assert "its config: [winner/config.pbtxt](winner/config.pbtxt)" in readme
    assert winner.strip() not in readme and "![online frontier](frontier.png)" in readme
    for point in _summary(work)["points"]:
        if f"[config.pbtxt]({point}/config.pbtxt)" in readme:
            assert (work / SEARCH / point / "config.pbtxt").is_file()
    assert readme.count("[config.pbtxt](") == sum(
        r["status"] == search.OK for r in _summary(work)["results"].values())
    assert (work / SEARCH / "frontier.png").read_bytes()[:4] == b"\x89PNG"


def test_a_new_value_builds_only_its_points_and_a_failing_point_does_not_stop_it(work):
    """max batch 2 beside 8: its points (preferred [4, 8]) are refused by Triton at load;
    they are recorded as failed with Triton's reason, the others stay measured."""
    models = work / "models"
    shutil.copytree(ROOT / "tests/config/models", models, dirs_exist_ok=True)
    path = models / "tft-tiny.yaml"
    config = yaml.safe_load(path.read_text())
    config["search"]["max_batch_size"] = [8, 2]
    path.write_text(yaml.safe_dump(config))
    setting = f"models_dir={models}"
    plan = planned_jobs(snakemake(work, "-n", f"{SEARCH}/README.md", "--config", setting))
    assert plan == {"search_repository": 4, "search_point": 4, "search_report": 1}
    snakemake(work, f"{SEARCH}/README.md", "--config", setting)
    grid = _summary(work)
    failed = [n for n, r in grid["results"].items() if r["status"] == "failed"]
    assert sorted(failed) == ["i1-q100-m2", "i1-q2000-m2", "i2-q100-m2", "i2-q2000-m2"]
    assert grid["winner"].endswith("-m8") and len(grid["results"]) == 8
    for point in failed:
        result = grid["results"][point]
        assert "preferred size must be <= max batch size" in result["reason"]
        assert not list((work / SEARCH / point).glob("*.csv"))  # nothing passes for a result
    readme = (work / SEARCH / "README.md").read_text()
    assert "| [i1-q100-m2](i1-q100-m2/point.json) | 1 | 100 | 2 | failed (online: " in readme
    assert "## Failed points" in readme
    assert "Nothing to be done" in snakemake(
        work, "-n", f"{SEARCH}/README.md", "--config", setting).stdout


def test_a_bad_search_stops_the_run_before_any_job(work, tmp_path):
    models = tmp_path / "models"
    shutil.copytree(ROOT / "tests/config/models", models)
    path = models / "tft-tiny.yaml"
    config = yaml.safe_load(path.read_text())
    config["search"]["preferred_batch_sizes"] = [[4], [16]]
    path.write_text(yaml.safe_dump(config))
    result = snakemake(work, "-n", "--config", f"models_dir={models}", check=False)
    assert result.returncode != 0
    assert "[16] exceed every max batch size searched (8)" in result.stdout + result.stderr
