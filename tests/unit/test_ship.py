"""What to ship (deploybench.reporting.ship, `deploybench ship`): from a results tree of
configuration folders, dated sets and search points, the one serving the most within the p99
budget, with the marks that say when its figure is not what one gets today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deploybench.reporting.ship import candidates, ship_page
from testkit.scenario_tables import measured

ROOT = Path(__file__).resolve().parents[2]


def test_a_dated_set_that_beats_every_folder_wins_and_levels_past_the_budget_do_not_count(
        tmp_path):
    gpu = tmp_path / "results/tft/h100"
    measured(gpu / "ts-trace_fp16", [(16, 50_000, 9.0, True), (64, 90_000, 30.0, True)])
    measured(gpu / "aoti-cg_fp16", [(16, 60_000, 10.0, True), (32, 70_000, 24.9, True)])
    measured(gpu / "rate-2026-11-26/aoti-cg_fp16",
             [(32, 80_000, 20.0, True), (64, 200_000, 25.1, True)],
             rate={"rate": 4000.0, "bracketed": True, "throughput": 64_000.0, "p99_ms": 22.0})
    ranked = candidates(gpu, 25)
    assert [c["folder"].relative_to(gpu).as_posix() for c in ranked] == [
        "rate-2026-11-26/aoti-cg_fp16", "aoti-cg_fp16", "ts-trace_fp16"]
    # each at its fastest level within 25 ms, not its fastest level: 80,000 not 200,000
    assert [c["throughput"] for c in ranked] == [80_000, 70_000, 50_000]
    page = ship_page("TFT", "h100", gpu, 25)
    assert "**Ship `rate-2026-11-26/aoti-cg_fp16`**: 80,000 inferences/s (online, " \
           "concurrency 32, batch 16, p99 20 ms)" in page
    assert "4000 requests/s within p99 25 ms (64,000 inferences/s, p99 22 ms)" in page
    assert "not kept (a dated set), nor a README" in page  # no config.pbtxt, no README
    # a tighter budget changes the answer: only levels within 15 ms count
    assert "**Ship `aoti-cg_fp16`**: 60,000 inferences/s" in ship_page("TFT", "h100", gpu, 15)


def test_an_unstable_or_contended_winner_is_marked_and_so_is_what_is_superseded(tmp_path):
    gpu = tmp_path / "results/tft/h100"
    measured(gpu / "aoti-cg_fp16", [(32, 90_000, 20.0, False)])  # did not settle
    measured(gpu / "set-2026-11-20/aoti-cg_fp16", [(32, 85_000, 20.0, True)], contended=(32,),
             code="old", date="2026-11-20T00:00:00")
    measured(gpu / "set-2026-11-21/ts-trace_fp16", [(32, 40_000, 20.0, True)],
             served_by="python", date="2026-11-21T00:00:00")
    measured(gpu / "ts-trace_fp16", [(32, 30_000, 20.0, True)])
    page = ship_page("TFT", "h100", gpu, 25)
    assert "**Ship `aoti-cg_fp16`**: 90,000 inferences/s" in page
    assert page.split("\n")[2].endswith("— **unstable**")
    runners = page.split("## Runners-up")[1]
    assert "| set-2026-11-20/aoti-cg_fp16 | online | 85000 |" in runners
    assert "host contended, older code" in runners
    assert ("set-2026-11-21/ts-trace_fp16 | online | 40000 | 20 | 16 | 32 | python backend "
            "| serving path superseded") in runners


def test_per_gpu_and_online_first(tmp_path):
    """A deployment over two GPUs is ranked by its throughput a GPU and says so; a
    measurement of offline levels only comes after every online one, however fast."""
    gpu = tmp_path / "results/tft/h200"
    measured(gpu / "two-gpus/aoti-cg_fp16", [(64, 150_000, 20.0, True)], gpus=2,
             config="name: \"tft\"\n")
    measured(gpu / "aoti-cg_fp16", [(64, 100_000, 20.0, True)], config="name: \"tft\"\n")
    measured(gpu / "offline-set/aoti-cg_fp16", [(1, 500_000, 5.0, True)], scenario="offline")
    ranked = candidates(gpu, 25)
    assert [c["per_gpu"] for c in ranked] == [100_000, 75_000, 500_000]
    page = ship_page("TFT", "h200", gpu, 25)
    assert "[config.pbtxt](aoti-cg_fp16/config.pbtxt)" in page
    assert "over 2 GPUs (75,000 inf/s a GPU)" in page and "offline only" in page


def test_no_level_within_the_budget_is_said_not_invented(tmp_path):
    gpu = tmp_path / "results/tft/h100"
    measured(gpu / "aoti-cg_fp16", [(32, 90_000, 40.0, True)])
    page = ship_page("TFT", "h100", gpu, 25)
    assert "No level measured" in page and "90,000" not in page


def test_the_command_writes_the_page_from_the_committed_results():
    """`deploybench ship tft h100`: the committed H100 results, the model's 25-ms budget, the
    C++ backend's figure with its rate answer; the committed SHIP.md is that page."""
    command = Path(sys.executable).with_name("deploybench")
    result = subprocess.run([str(command), "ship", "tft", "h100", "--no-write"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    page = result.stdout
    assert page == ship_page("TFT (electricity)", "h100", Path("results/tft/h100"), 25)
    assert page == (ROOT / "results/tft/h100/SHIP.md").read_text()
    best = candidates(ROOT / "results/tft/h100", 25)[0]
    assert best["scenario"] == "online" and best["p99_ms"] <= 25
    assert best["backend"] == "deploybench"
    assert f"{best['throughput']:,.0f} inferences/s (online" in page
    assert "requests/s within p99 25 ms" in page  # its maximum Poisson rate
