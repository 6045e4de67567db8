"""Regression reports' rules: which baseline a setting picks, the noise of a level and when
a change counts (the real runs: tests/e2e/test_pipeline_reports.py)."""

from pathlib import Path

import pytest

from deploybench.records import baseline, formats, layout
from deploybench.reporting.compare import changed, differences, noise
from deploybench.settings.config import ConfigError, check_main
from testkit.workflow import main_config


def test_a_change_counts_only_where_the_two_ranges_do_not_overlap():
    assert changed(100, 125, 10, 10) == 1  # 112.5 > 110
    assert changed(100, 120, 10, 10) == 0  # 108 < 110: within both sides' noise
    assert changed(100, 80, 10, 10) == -1  # 88 < 90
    assert changed(100, 85, 10, 10) == 0
    assert changed(100, 24, 60, 60) == -1 and changed(100, 26, 60, 60) == 0
    assert changed(100, 130, 5, 30) == 0  # one noisy side is enough to keep it


def test_ranges_that_touch_overlap_and_each_side_widens_only_its_own_value():
    # the ends equal (in binary too): no change; just beyond: a change
    assert changed(100, 110, 10, 0) == 0 and changed(100, 110.001, 10, 0) == 1
    assert changed(100, 90, 10, 0) == 0 and changed(100, 89.999, 10, 0) == -1
    assert changed(100, 125, 0, 20) == 0 and changed(100, 125.001, 0, 20) == 1  # 100 = 125 * 0.8
    assert changed(100, 80, 0, 25) == 0 and changed(100, 79.999, 0, 25) == -1  # 80 * 1.25 = 100
    # the base's noise widens the base, the current's the current: swapped, the verdict moves
    assert changed(100, 140, 30, 5) == 1  # 133 > 130
    assert changed(100, 140, 5, 30) == 0  # 98 < 105
    assert changed(100, 86, 5, 10) == -1  # 94.6 < 95
    assert changed(100, 86, 10, 5) == 0  # 90.3 > 90


def test_noise_is_the_larger_of_the_stability_criterion_and_the_interval():
    level = {"Batch": 4, "Concurrency": 1, "Shared memory": "system"}
    report = {"perf_analyzer_settings": {"stability_percentage": 10}, "repeats": [
        {"Batch": 4, "Concurrency": 1, "Shared memory": "system", "ci95": [700.0, 1040.0]},
        {"Batch": 1, "Concurrency": 1, "Shared memory": "system", "ci95": [1.0, 9000.0]}]}
    assert noise(report, level, 1000.0) == 30.0  # the interval's lower end: 30 % below
    assert noise(report, {**level, "Batch": 8}, 1000.0) == 10.0  # no repeats for the level
    assert noise({"perf_analyzer_settings": {"stability_percentage": 60}}, level, 5.0) == 60.0
    assert noise({}, {"Batch": 4}, 5.0, stability=30) == 30.0  # native: the offline's
    above = {**report, "repeats": [{**report["repeats"][0], "ci95": [990.0, 1255.0]}]}
    assert noise(above, level, 1000.0) == 25.5  # the interval's upper end: 25.5 % above
    assert noise(above, level, 0.0) == 10.0  # no value to scale an interval by
    assert noise({"repeats": above["repeats"]}, level, 1000.0) == 25.5  # default criterion 10
    small = {"repeats": [{**report["repeats"][0], "ci95": [0.4, 0.65]}]}
    assert noise(small, level, 0.5) == 30.0  # a value below 1 is scaled too
    fine = {"repeats": [{**report["repeats"][0], "ci95": [876.543, 1000.0]}]}
    assert noise(fine, level, 1000.0) == 12.35  # 12.3457 % to two decimals


def test_an_unstable_side_widens_to_its_spread_and_a_missing_flag_is_stable():
    import pandas as pd

    from deploybench.reporting.compare import _unstable_noise

    def row(stable, spread):
        return pd.Series({"Stable now": stable, "window spread (%) now": spread})

    assert _unstable_noise(row(False, 35.0), "now", 10.0) == (35.0, True)
    assert _unstable_noise(row(False, 5.0), "now", 10.0) == (10.0, True)
    assert _unstable_noise(row(False, float("nan")), "now", 10.0) == (10.0, True)
    assert _unstable_noise(row(float("nan"), 35.0), "now", 10.0) == (10.0, False)
    assert _unstable_noise(row(True, 35.0), "now", 10.0) == (10.0, False)
    assert _unstable_noise(pd.Series({"other": 1}), "now", 10.0) == (10.0, False)


def test_differences_name_each_field_and_what_one_side_lacks():
    old = {"project": {"commit": "a", "dirty": False}, "gpus": [{"driver": "570"}],
           "date": "today"}
    new = {"project": {"commit": "b", "dirty": False}, "gpus": [{"driver": "580"}],
           "date": "tomorrow", "cuda": "13.0"}
    assert differences(old, new, ("date",)) == {
        "cuda": ("not recorded", "13.0"), "gpus[0].driver": ("570", "580"),
        "project.commit": ("a", "b")}


def _measurement(folder, name, stamp=None, text="x"):
    for suffix in (".csv", ".json"):
        path = folder / f"{name}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f"{text}{suffix}"
        if stamp:
            copy = layout.history_copy(path, stamp)
            copy.parent.mkdir(exist_ok=True)
            copy.write_text(body)
        else:
            path.write_text(body)


def test_each_setting_picks_its_baseline(tmp_path):
    folder = tmp_path / "results/m/cpu/onnx_fp32"
    for stamp, text in (("20261101T000000Z", "first"), ("20261102T000000Z", "second"),
                        ("20261103T000000Z", "third")):
        _measurement(folder, "offline", stamp, text)
    _measurement(folder, "offline", text="third")  # the current one: the newest copy
    _measurement(folder, "online", "20261102T120000Z", "only")
    _measurement(folder, "online", text="only")

    previous = baseline.find(folder, "offline", "previous")
    assert previous.label == "history/offline-20261102T000000Z"
    assert previous.csv.read_text() == "second.csv"
    assert baseline.current(folder, "offline").label == "history/offline-20261103T000000Z"
    assert baseline.find(folder, "online", "previous") is None  # measured once
    # a stamp: the copy current then
    assert baseline.find(folder, "offline", "20261101T120000Z").label.endswith("01T000000Z")
    assert baseline.find(folder, "online", "20261101T120000Z") is None
    # a folder, or its folder named as the configuration
    committed = tmp_path / "set"
    _measurement(committed / "onnx_fp32", "offline", text="committed")
    found = baseline.find(folder, "offline", str(committed))
    assert found.csv == committed / "onnx_fp32/offline.csv" and found.label == str(
        committed / "onnx_fp32")
    assert baseline.find(folder, "online", str(committed)) is None
    assert baseline.folder_files(folder, str(committed)) == [
        str(committed / "onnx_fp32/offline.csv"), str(committed / "onnx_fp32/offline.json")]
    assert baseline.folder_files(folder, "previous") == []


def test_a_current_measurement_without_a_copy_compares_with_the_newest(tmp_path):
    """Measured before measurements were archived (or its copy removed)."""
    folder = tmp_path / "c"
    _measurement(folder, "native", "20261101T000000Z", "old")
    _measurement(folder, "native", text="new")
    assert baseline.current(folder, "native").label == "native.json"
    assert baseline.find(folder, "native", "previous").label == "history/native-20261101T000000Z"


@pytest.mark.parametrize("setting", ["last-tuesday", "2026-11-24", "20261124T0630Z",
                                     "no/such/folder"])
def test_a_bad_baseline_names_itself_and_what_is_valid(setting):
    with pytest.raises(ConfigError) as err:
        check_main(main_config(compare={"baseline": setting}))
    assert str(err.value) == (
        f"compare.baseline '{setting}' is not a baseline; valid: 'previous', a history stamp "
        "(YYYYMMDDTHHMMSSZ, UTC, as history/ names its copies) or an existing folder holding "
        "offline/online/native .csv and .json")


@pytest.mark.parametrize("setting", ["previous", "20261124T063004Z", "config"])
def test_good_baselines_pass(setting, monkeypatch):
    from testkit.workflow import ROOT

    monkeypatch.chdir(ROOT)
    check_main(main_config(compare={"baseline": setting}))


def test_two_package_lists_are_diffed_by_name(tmp_path):
    from deploybench.reporting.compare import package_changes

    folder = tmp_path / "results/packages"
    folder.mkdir(parents=True)
    (folder / "aaa.txt").write_text("numpy==1.26.4\nonnx==1.22.0\ntorch==2.12.0\n")
    (folder / "bbb.txt").write_text("numpy==1.26.4\nplaywright==1.65.2\ntorch==2.13.0\n")
    assert package_changes("aaa", "bbb", tmp_path) == [
        "torch 2.12.0 → 2.13.0", "playwright 1.65.2 added", "onnx 1.22.0 removed"]
    assert package_changes("aaa", "ccc", tmp_path) == [
        f"package list `{tmp_path}/results/packages/ccc.txt` not found: the lists cannot be "
        "compared"]


def test_the_committed_h100_rerun_against_the_earlier_set(monkeypatch):
    """The H100 re-run (results/bert/h100/regression-2026-11-24, telemetry and 3 repeats)
    against the set measured hours before on another machine: every verdict follows from
    the two throughputs and each side's noise, and what the older set did not record (its
    package list, the project's commit, the device) is listed as a difference."""
    from deploybench.reporting.compare import compare_configuration
    from testkit.workflow import ROOT

    monkeypatch.chdir(ROOT)
    result = compare_configuration(
        ROOT / "results/bert/h100/regression-2026-11-24/torch-compile_fp16",
        "results/bert/h100/torch-compile-2026-11-24")
    compared = {s.name: s for s in result.scenarios if s.table is not None}
    assert set(compared) == {"offline", "online", "native"}
    for s in compared.values():
        inf = [c for c in s.table.columns if c.startswith("inf/s")]
        base, now = s.table[inf[0]], s.table[inf[1]]
        for b, n, verdict in zip(base, now, s.table["verdict"]):
            if verdict == "slower":
                assert n * 1.1 < b * 0.9, (s.name, b, n)
            if verdict == "faster" and s.name != "native":  # native judges its device column
                assert n * 0.9 > b * 1.1, (s.name, b, n)
        assert sum(s.counts.values()) == len(s.table)
    assert compared["offline"].counts == {"slower": 1, "unchanged": 5}
    assert ("not recorded", "GPU-64bf5357-837d-7ab3-6128-159e22e670ae") in \
        result.provenance["device"]
    assert result.packages == ["the baseline recorded no package list (offline, online, native)"]


def test_the_comparison_step_reads_the_files_it_is_given(tmp_path, monkeypatch):
    """configuration_comparison compares the tables and JSONs its rule gives it (and a
    folder baseline's files, given too): the same report as the configuration's folder
    read whole, and a scenario not given is not measured, whatever else is on disk."""
    from deploybench.reporting.compare import compare_configuration
    from deploybench.reporting.compare_report import render_configuration
    from deploybench.steps.report import configuration_comparison
    from testkit.workflow import ROOT

    monkeypatch.chdir(ROOT)
    folder = ROOT / "results/bert/h100/regression-2026-11-24/torch-compile_fp16"
    setting = "results/bert/h100/torch-compile-2026-11-24"
    inputs = {f"{s}{suffix}": folder / f"{s}.{ext}" for s in baseline.SCENARIOS
              for suffix, ext in (("", "csv"), ("_json", "json"))}
    spec, out = {"title": "t", "baseline": setting}, tmp_path / "compare.md"
    given = [Path(f) for f in baseline.folder_files(folder, setting)]
    configuration_comparison(spec, **inputs, out=out, baseline=given)
    assert out.read_text() == render_configuration("t", compare_configuration(folder, setting))
    configuration_comparison(spec, **{**inputs, "native": [], "native_json": []}, out=out,
                             baseline=[f for f in given if not f.name.startswith("online")])
    text = out.read_text()
    assert "## Native\n\nNot measured yet: no `native.csv` and `native.json`." in text
    assert f"## Online\n\nNo baseline yet: `{setting}` holds no `online.csv`" in text


def test_a_history_copy_that_fails_leaves_nothing_that_looks_like_one(tmp_path):
    """A write that fails midway (a full disk; here a file-size limit of 4 kB) leaves no
    short copy for a later report to take as the previous measurement."""
    import resource
    import signal

    from deploybench.sweeps.record import archive

    csv = tmp_path / "offline.csv"
    csv.write_text("Batch,Inferences/Second\n" + "1,100.0\n" * 2000)  # 16 kB
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not the signal
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
        with pytest.raises(OSError):
            archive(csv)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert list((tmp_path / layout.HISTORY).iterdir()) == []
    archive(csv)
    [copy] = layout.history_copies(csv).values()
    assert copy.read_bytes() == csv.read_bytes()


def _side(folder: Path, throughput: float, ci95=None, stable=True, spread=float("nan"),
          contended=False) -> baseline.Measurement:
    """One side of a comparison: offline batch 4 at `throughput`, 10 ms average, stability
    criterion 10 %, with its repeats' interval `ci95` and host load where given."""

    import pandas as pd

    folder.mkdir(parents=True)
    level = {"Batch": 4, "Concurrency": 1, "Shared memory": "system"}
    pd.DataFrame([{**level, "Inferences/Second": throughput, "avg latency (ms)": 10.0,
                   "p99 latency (ms)": 12.0, "sum of components (ms)": 10.0, "Stable": stable,
                   "window spread (%)": spread}]).to_csv(folder / "offline.csv", index=False)
    report = {"perf_analyzer_settings": {"stability_percentage": 10},
              "host_load": [{**level, "contended": contended}]}
    if ci95:
        report["repeats"] = [{**level, "ci95": ci95}]
    (folder / "offline.json").write_text(formats.text(report))
    return baseline.Measurement(folder / "offline.csv", folder / "offline.json", folder.name)


def _verdict(tmp_path, base: dict, now: dict) -> dict:
    from deploybench.reporting.compare import compare_scenario

    found = compare_scenario("offline", _side(tmp_path / "now", **now),
                             _side(tmp_path / "base", **base))
    return found.table.iloc[0].to_dict()


def test_each_sides_noise_is_its_own(tmp_path):
    """Baseline 100 inf/s, its repeats' interval 40-160 (60 % noise); current 200 inf/s at
    the 10 % criterion: 180-220 lies above 40-160, faster. The same sides with the noises
    swapped (100 ± 10 %, 200 ± 60 %: 80-320) would overlap: a noise read from the wrong side
    gives unchanged."""
    row = _verdict(tmp_path, {"throughput": 100.0, "ci95": [40.0, 160.0]},
                   {"throughput": 200.0})
    assert (row["verdict"], row["noise ± % (baseline, current)"]) == ("faster", "60, 10")
    assert row["inf/s change"] == "+100.0 %" and row["avg ms change"] == "+0.0 %"
    row = _verdict(tmp_path / "swapped", {"throughput": 100.0},
                   {"throughput": 200.0, "ci95": [80.0, 320.0]})
    assert (row["verdict"], row["noise ± % (baseline, current)"]) == ("unchanged", "10, 60")


def test_slower_beyond_both_sides_noise_and_not_within_it(tmp_path):
    """200 -> 100 at 10 % each: 90-110 below 180-220, slower; 200 -> 175: 157.5-192.5
    overlaps 180-220, unchanged."""
    assert _verdict(tmp_path / "a", {"throughput": 200.0},
                    {"throughput": 100.0})["verdict"] == "slower"
    assert _verdict(tmp_path / "b", {"throughput": 200.0},
                    {"throughput": 175.0})["verdict"] == "unchanged"


def test_an_unstable_levels_noise_widens_to_its_window_spread(tmp_path):
    """Current 200 inf/s kept unstable with windows 50 % apart: 100-300 does not lie above
    the baseline's 90-110 (100 at 10 %), unchanged; stable (180-220) it is faster. A spread
    below the criterion leaves 10 %; an unstable side without a recorded spread keeps its
    noise; a contended side is named."""
    row = _verdict(tmp_path / "a", {"throughput": 100.0},
                   {"throughput": 200.0, "stable": False, "spread": 50.0})
    assert (row["verdict"], row["unstable"]) == ("unchanged", "current")
    assert row["noise ± % (baseline, current)"] == "10, 50"
    row = _verdict(tmp_path / "b", {"throughput": 100.0, "stable": False, "spread": 45.0},
                   {"throughput": 200.0})
    assert (row["unstable"], row["noise ± % (baseline, current)"]) == ("baseline", "45, 10")
    assert row["verdict"] == "faster"  # 180-220 above 55-145
    row = _verdict(tmp_path / "c", {"throughput": 100.0},
                   {"throughput": 200.0, "stable": False, "spread": 4.0})
    assert (row["verdict"], row["noise ± % (baseline, current)"]) == ("faster", "10, 10")
    row = _verdict(tmp_path / "d", {"throughput": 100.0},
                   {"throughput": 200.0, "stable": False})
    assert (row["verdict"], row["unstable"]) == ("faster", "current")
    row = _verdict(tmp_path / "e", {"throughput": 100.0, "contended": True},
                   {"throughput": 200.0})
    assert row["contended"] == "baseline"


def test_levels_on_one_side_only_and_a_mixed_verdict(tmp_path):
    """Baseline batches 4 and 8, current 4 and 16: 8 removed (its baseline figures kept),
    16 added (its current ones); batch 4 twice as fast but with twice the average latency
    (lower is better): mixed, each change in %."""

    import pandas as pd

    from deploybench.reporting.compare import compare_scenario

    def side(folder, rows):
        folder.mkdir()
        table = pd.DataFrame([{"Batch": b, "Concurrency": 1, "Shared memory": "system",
                               "Inferences/Second": t, "avg latency (ms)": ms,
                               "p99 latency (ms)": ms, "sum of components (ms)": ms}
                              for b, t, ms in rows])
        table.to_csv(folder / "offline.csv", index=False)
        (folder / "offline.json").write_text(formats.text(
            {"perf_analyzer_settings": {"stability_percentage": 10}}))
        return baseline.Measurement(folder / "offline.csv", folder / "offline.json", "x")

    found = compare_scenario("offline", side(tmp_path / "now", [(4, 200.0, 20.0),
                                                                (16, 900.0, 17.0)]),
                             side(tmp_path / "base", [(4, 100.0, 10.0), (8, 500.0, 16.0)]))
    rows = found.table.set_index("Batch")
    assert rows["verdict"].to_dict() == {4: "mixed", 8: "removed", 16: "added"}
    assert found.counts == {"mixed": 1, "removed": 1, "added": 1}
    assert (rows.loc[4, "inf/s change"], rows.loc[4, "avg ms change"]) == ("+100.0 %",
                                                                           "+100.0 %")
    assert rows.loc[8, "inf/s baseline"] == 500.0 and pd.isna(rows.loc[8, "inf/s current"])
    assert rows.loc[16, "inf/s current"] == 900.0 and pd.isna(rows.loc[16, "inf/s baseline"])
    assert rows.loc[16, "avg ms current"] == 17.0
