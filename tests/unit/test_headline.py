"""The reports' headlines, built from small tables written here: every number checked
against these files; served/native left out where one side alone ran beside other load;
each frontier line's Pareto front; the HTML report's front page with the headlines."""

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from deploybench.records import formats
from deploybench.records.tables import COMPONENT_SUM, SHARED_MEMORY, THROUGHPUT
from deploybench.reporting.headline import configuration_headline, configuration_lines, model_lines
from deploybench.reporting.model_report import _dated_line, dated_sets_table
from deploybench.reporting.plots import pareto_front
from deploybench.reporting.served_native import served_vs_native, served_vs_native_table
from testkit.workflow import ROOT

PROV = {"device": "cpu", "server": {"served_by": "deploybench"}}


def _load(level: dict, contended: bool) -> dict:
    return {**level, "other_cpu_cores": 1.2 if contended else 0.0, "contended": contended}


def write_configuration(folder: Path, offline_contended=(), native_contended=False,
                        online=True, passed=True) -> Path:
    """A configuration's tables: offline batches 1, 4, 16; online concurrency 1, 2, 4;
    native batches 1, 4, 16; accuracy with one deviation check; host load per level."""
    folder.mkdir(parents=True)
    offline = pd.DataFrame({"Batch": [1, 4, 16], "Concurrency": 1,
                            THROUGHPUT: [100.0, 380.0, 1250.0],
                            "p99 latency (ms)": [11.0, 12.5, 14.0], SHARED_MEMORY: "system",
                            COMPONENT_SUM: [10.0, 10.5, 12.8]})
    offline.to_csv(folder / "offline.csv", index=False)
    levels = [{"Batch": b, "Concurrency": 1, SHARED_MEMORY: "system"} for b in (1, 4, 16)]
    (folder / "offline.json").write_text(formats.text({"provenance": PROV, "host_load": [
        _load(level, level["Batch"] in offline_contended) for level in levels]}))
    if online:
        pd.DataFrame({"Batch": 1, "Concurrency": [1, 2, 4],
                      THROUGHPUT: [90.0, 170.0, 160.0], "p99 latency (ms)": [12.0, 13.25, 30.0],
                      SHARED_MEMORY: "none", COMPONENT_SUM: [10.0, 11.0, 24.0]}).to_csv(
            folder / "online.csv", index=False)
        (folder / "online.json").write_text(formats.text({"provenance": PROV, "host_load": [
            _load({"Batch": 1, "Concurrency": c, SHARED_MEMORY: "none"}, False)
            for c in (1, 2, 4)]}))
    pd.DataFrame({"Batch": [1, 4, 16], THROUGHPUT: [125.0, 400.0, 2000.0]}).to_csv(
        folder / "native.csv", index=False)
    (folder / "native.json").write_text(formats.text({"provenance": PROV, "host_load": _load(
        {}, native_contended)}))
    pd.DataFrame([
        {"name": "p50_risk", "kind": "metric", "triton": 1.2345, "source": 1.2346,
         "limit": None, "passed": None},
        {"name": "max_abs_deviation:target__0", "kind": "deviation",
         "triton": 2e-5 if passed else 0.5, "source": 0.0, "limit": 0.001, "passed": passed},
    ]).to_csv(folder / "accuracy.csv", index=False)
    return folder


def headline_of(folder: Path) -> dict:
    return configuration_headline(*(folder / f"{n}.csv" if (folder / f"{n}.csv").is_file()
                                    else None for n in ("offline", "online", "native",
                                                        "accuracy")))


def test_a_configuration_headline_takes_every_number_from_its_files(tmp_path):
    folder = write_configuration(tmp_path / "c")
    facts = headline_of(folder)
    assert facts["offline"] | {} == {**facts["offline"], "throughput": 1250.0, "batch": 16,
                                     "contended": False}
    assert (facts["online"]["throughput"], facts["online"]["concurrency"],
            facts["online"]["p99_ms"]) == (170.0, 2, 13.25)
    assert facts["served_native"]["ratio"] == round(1250 / 2000, 3) == 0.625
    text = configuration_lines(facts, "deploybench backend")
    assert "- **Offline** (best of the batch sweep): 1,250 inf/s at batch 16\n" in text
    assert "- **Online** peak: 170 inf/s at concurrency 2, p99 13.2 ms\n" in text
    assert ("- **Served/native** at the largest batch: 0.625 at batch 16 (system shared "
            "memory)") in text
    assert ("passed: largest deviation from the source model 2e-05 (limit 0.001, output "
            "target__0); p50_risk 1.234 on Triton, 1.235 from the source model") in text
    assert "- **Host**: not contended during any of 7 measurements" in text
    assert text.endswith("- **Served by**: deploybench backend")


def _rate_json(folder: Path, rate, high, throughput) -> Path:
    """A rate.json of the rate step's shape: the bracket of the highest rate within 40 ms."""
    path = folder / "rate.json"
    path.write_text(formats.text({"settings": {"p99_budget_ms": 40}, "max_rate_within_budget": {
        "rate": rate, "bracket": [rate, high], "throughput": throughput}}))
    return path


def test_the_rate_answer_is_the_highest_rate_within_the_budget_read_from_its_file(tmp_path):
    """The configuration and model headlines give rate.json's answer: the rate, its
    throughput and the budget; said as a floor where every rate kept it, as none where none
    did; not measured (and out of the model line) without the file."""
    folder = write_configuration(tmp_path / "c")
    files = [folder / f"{n}.csv" for n in ("offline", "online", "native", "accuracy")]
    for (rate, high, throughput), said in [
            ((193.0, 241.5, 1544.0), "193 requests/s (1,544 inf/s) within p99 40 ms"),
            ((480.0, None, 3840.0), "above 480 requests/s (3,840 inf/s) within p99 40 ms"),
            ((None, 50.0, None), "no rate measured kept p99 within 40 ms")]:
        facts = configuration_headline(*files, _rate_json(folder, rate, high, throughput))
        assert f"- **Rate** (open loop): {said}\n" in configuration_lines(facts, "")
        assert f"; rate {said}; " in model_lines({"cpu onnx_fp32": {**facts,
                                                                    "served_by": ""}})
    facts = headline_of(folder)
    assert "- **Rate** (open loop): not measured\n" in configuration_lines(facts, "")
    assert "rate" not in model_lines({"cpu onnx_fp32": {**facts, "served_by": ""}}).split(
        "online")[1].split("served/native")[0]


def test_a_deployment_over_two_gpus_gives_a_gpus_share_too(tmp_path):
    """triton.gpus 2 (the offline JSON's triton settings): each peak also a GPU's share."""
    folder = write_configuration(tmp_path / "c")
    report = json.loads((folder / "offline.json").read_text())
    (folder / "offline.json").write_text(formats.text({**report, "triton": {"gpus": 2}}))
    text = configuration_lines(headline_of(folder), "deploybench backend")
    assert "1,250 inf/s (625 a GPU of 2) at batch 16\n" in text
    assert "170 inf/s (85 a GPU of 2) at concurrency 2" in text


def test_what_was_not_measured_is_said_never_a_number(tmp_path):
    folder = write_configuration(tmp_path / "c", online=False, passed=False)
    (folder / "native.csv").unlink()
    text = configuration_lines(headline_of(folder), "python backend")
    assert "- **Online** peak: not measured\n" in text
    assert "- **Served/native** at the largest batch: not measured\n" in text
    assert "- **Accuracy** against the source model: failed: largest deviation" in text
    assert "- **Host**: not contended during any of 3 measurements" in text  # offline only


def test_a_contended_level_is_marked_beside_its_numbers(tmp_path):
    folder = write_configuration(tmp_path / "c", offline_contended=(16,))
    text = configuration_lines(headline_of(folder), "python backend")
    assert "1,250 inf/s (host contended) at batch 16" in text
    assert "contended during 1 of 7 measurements (offline batch 16)" in text


def test_an_ensembles_native_loop_that_timed_the_request_being_made_has_no_ratio(tmp_path):
    """An ensemble's offline rows (Served by: ensemble) beside a native loop that made the
    request from the samples inside its timing (before native.json's `timed_from`): no
    ratio, and why; with `timed_from: request` the ratios are the files'. A single model's
    native.json needs no such entry."""
    folder = write_configuration(tmp_path / "e")
    offline = pd.read_csv(folder / "offline.csv").assign(**{"Served by": "ensemble"})
    offline.to_csv(folder / "offline.csv", index=False)
    ratio = served_vs_native(folder / "offline.csv", folder / "native.csv")
    assert ratio["served/native"].isna().all()
    text = configuration_lines(headline_of(folder), "")
    assert ("**Served/native** at the largest batch: left out: native timed the request's "
            "making too (the ensemble's samples made into its request)") in text
    native = json.loads((folder / "native.json").read_text())
    (folder / "native.json").write_text(formats.text({**native, "timed_from": "request"}))
    ratio = served_vs_native(folder / "offline.csv", folder / "native.csv")
    assert ratio["served/native"].tolist() == [0.8, 0.95, 0.625]  # 100/125, 380/400, 1250/2000
    single = write_configuration(tmp_path / "s")  # Served by deploybench: kept as it was
    assert served_vs_native(single / "offline.csv", single / "native.csv")[
        "served/native"].tolist() == [0.8, 0.95, 0.625]
    # lookups through a cache: the native loop's python store is not the served engine's
    cached = {**native, "timed_from": "request", "sparse_store": {"whole_on_device": False}}
    (folder / "native.json").write_text(formats.text(cached))
    assert served_vs_native(folder / "offline.csv", folder / "native.csv")[
        "served/native"].isna().all()
    assert "left out: native's cached lookups are the python store's" in configuration_lines(
        headline_of(folder), "")
    (folder / "native.json").write_text(formats.text({**native, "timed_from": "request"}))
    served = json.loads((folder / "offline.json").read_text())
    (folder / "offline.json").write_text(formats.text(
        {**served, "embedding_cache": {"hit_rate": 0.57}}))  # a served miss says it too
    assert served_vs_native(folder / "offline.csv", folder / "native.csv")[
        "served/native"].isna().all()


def test_served_over_native_leaves_out_a_row_only_one_side_measured_contended(tmp_path):
    quiet_native = write_configuration(tmp_path / "a", offline_contended=(4,))
    ratio = served_vs_native(quiet_native / "offline.csv", quiet_native / "native.csv")
    assert list(ratio["contended"]) == ["", "served", ""]
    assert ratio["served/native"].tolist()[::2] == [0.8, 0.625]  # 100/125, 1250/2000
    assert pd.isna(ratio["served/native"].iloc[1])
    table = served_vs_native_table(quiet_native / "offline.csv", quiet_native / "native.csv")
    assert ("batch 4 (system): left out: served ran beside other load, native did not"
            in table)
    # native contended all along: only the row contended on both sides keeps its ratio
    both = write_configuration(tmp_path / "b", offline_contended=(16,), native_contended=True)
    ratio = served_vs_native(both / "offline.csv", both / "native.csv")
    assert list(ratio["contended"]) == ["native", "native", "both"]
    assert ratio["served/native"].isna().tolist() == [True, True, False]
    assert "0.625 at batch 16" in configuration_lines(headline_of(both), "")
    # the largest batch left out: the headline says why instead of a ratio
    text = configuration_lines(headline_of(write_configuration(
        tmp_path / "c", offline_contended=(16,))), "")
    assert ("**Served/native** at the largest batch: left out: served ran beside other "
            "load, native did not at batch 16") in text


def test_the_model_headline_has_a_line_a_configuration_and_the_fastest(tmp_path):
    slow = write_configuration(tmp_path / "slow", online=False)
    fast = write_configuration(tmp_path / "fast")
    table = pd.read_csv(fast / "offline.csv")
    table[THROUGHPUT] *= 2  # 2,500 inf/s at batch 16
    table.to_csv(fast / "offline.csv", index=False)
    text = model_lines({"cpu slow_fp32": headline_of(slow), "cpu fast_fp32": headline_of(fast)})
    lines = text.splitlines()
    assert lines[0].startswith("- **cpu slow_fp32**: offline 1,250 inf/s at batch 16; "
                               "online not measured; served/native 0.625 at batch 16")
    assert lines[1].startswith("- **cpu fast_fp32**: offline 2,500 inf/s at batch 16; "
                               "online 170 inf/s at concurrency 2, p99 13.2 ms; "
                               "served/native 1.25 at batch 16")
    assert "accuracy passed; host not contended; deploybench backend" in lines[1]
    assert lines[2] == ("- Fastest offline **cpu fast_fp32** (2,500 inf/s); fastest online "
                        "**cpu fast_fp32** (170 inf/s)")


def test_the_model_headline_names_the_fastest_of_the_dated_sets(tmp_path):
    """Dated sets (results/<model>/<gpu>/<name>-<date>/) hold later runs than the
    configuration folders: the headline says where their fastest figures are."""
    for name, throughput in (("early-2026-11-01", 1000.0), ("late-2026-11-02", 3000.0)):
        folder = tmp_path / "h100" / name
        (folder / "onnx_fp16").mkdir(parents=True)
        (folder / "NOTES.md").write_text(f"# {name}\n")
        pd.DataFrame({THROUGHPUT: [throughput / 2, throughput]}).to_csv(
            folder / "onnx_fp16/offline.csv", index=False)
    assert _dated_line(dated_sets_table(tmp_path / "README.md")) == (
        "\n- Dated measurement sets (2, below, each with its notes): fastest offline 3,000 "
        "inf/s (h100 late-2026-11-02, onnx_fp16)")
    assert _dated_line(dated_sets_table(tmp_path / "none" / "README.md")) == ""


def test_a_pareto_front_keeps_the_points_nothing_beats():
    latency = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0, 0.5])
    throughput = pd.Series([10.0, 30.0, 20.0, 40.0, 40.0, 5.0])
    # (3, 20) has less than (2, 30) for more latency; (5, 40) as much as (4, 40), later
    assert pareto_front(latency, throughput).tolist() == [True, True, False, True, False,
                                                          True]


def test_the_front_page_lists_each_model_with_its_headline_and_links(tmp_path, monkeypatch):
    """report/workflow.rst as Snakemake renders it (Jinja2, then docutils) with a model's
    report and one configuration's in the report: the headline's numbers and a link to
    each page (its entry, one click; the entry's button shows it)."""
    jinja2 = pytest.importorskip("jinja2")
    docutils_core = pytest.importorskip("docutils.core")
    monkeypatch.chdir(tmp_path)  # Snakemake renders in the working directory
    config = write_configuration(tmp_path / "results/m/cpu/onnx_fp32")
    (tmp_path / "results/m/headline.md").write_text(
        model_lines({"cpu onnx_fp32": headline_of(config)}) + "\n")

    def record(path):
        return SimpleNamespace(name=Path(path).name, path=Path(path))

    category = pytest.importorskip("snakemake.report").Category
    categories = {category("m"): {
        category("all configurations"): [record("results/m/README.html")],
        category("cpu/onnx_fp32"): [
            record("results/m/cpu/onnx_fp32/offline.csv"),
            record("results/m/cpu/onnx_fp32/README.html")]}}
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string((ROOT / "report/workflow.rst").read_text()).render(
        categories=categories, files=[])
    html = docutils_core.publish_parts(text, writer="html")["html_body"]
    assert "<strong>cpu onnx_fp32</strong>: offline 1,250 inf/s at batch 16;" in html
    assert "online 170 inf/s at concurrency 2, p99 13.2 ms" in html
    assert "Fastest offline <strong>cpu onnx_fp32</strong> (1,250 inf/s)" in html
    for page in ("results/m/README.html", "results/m/cpu/onnx_fp32/README.html"):
        assert f"javascript:app.showResultInfo('{page}')" in html
    assert ">all configurations README</a>" in html and ">cpu/onnx_fp32 README</a>" in html
    assert "offline.csv" not in html  # the pages alone
    assert "system-message" not in html  # docutils found nothing wrong


def test_the_report_says_how_perf_analyzer_windowed_a_scenario():
    """From the settings a scenario's JSON recorded (count windows: the count it ran, raised
    to a third of perf.min_requests online; time windows: their length)."""
    from deploybench.reporting.configuration_report import _perf_settings

    ran = {"protocol": "http", "shared_memory": ["system"], "warmup_windows": 2,
           "measurement_mode": "count_windows", "measurement_interval_ms": 250,
           "measurement_request_count": 15}
    # measured before 2026-11-28: how many warm-up windows was not recorded
    assert _perf_settings(ran) == ("HTTP, shared memory system, 15 requests a window, "
                                   "warm-up of windows of 30 requests at batch max x "
                                   "concurrency max")
    ran |= {"warmup_levels": [[1, 8], [1, "max"]], "warmup_trials": 3}
    assert _perf_settings(ran).endswith("warm-up of 3 windows of 30 requests at batch 1 x "
                                        "concurrency 8, batch 1 x concurrency max")
    ran["measurement_mode"] = "time_windows"  # FastPitch's: a minute, six of its windows
    assert _perf_settings(ran).endswith("0.25 s windows, warm-up of 3 windows of 0.5 s at "
                                        "batch 1 x concurrency 8, batch 1 x concurrency max")
    ran |= {"measurement_mode": "time_windows", "shared_memory": [], "warmup_windows": 0}
    assert _perf_settings(ran) == "HTTP, shared memory none, 0.25 s windows, no warm-up run"


def test_an_unstable_peak_is_marked_beside_its_number(tmp_path):
    """A fastest level whose windows did not settle (perf_analyzer's stability, the `Stable`
    column) says so, as a contended one does; a settled one does not."""
    folder = write_configuration(tmp_path / "u")
    offline = pd.read_csv(folder / "offline.csv").assign(Stable=[True, True, False])
    offline.to_csv(folder / "offline.csv", index=False)
    text = configuration_lines(headline_of(folder), "")
    assert "1,250 inf/s (unstable) at batch 16" in text
    assert "(unstable)" not in text.split("**Online**")[1].split("\n")[0]


def test_a_search_frontier_draws_its_budget_on_the_p99_panels_only(tmp_path, monkeypatch):
    from deploybench.reporting import plots
    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: drawn.setdefault("fig", fig))
    rows = pd.DataFrame({THROUGHPUT: [10.0, 20.0, 15.0], "p99 latency (ms)": [5.0, 30.0, 40.0],
                         "avg latency (ms)": [4.0, 20.0, 30.0]})
    plots.frontier_plot([("h100", "point", False, rows)], "online", "t", tmp_path / "f.png",
                        budget_ms=25)
    axes = [ax for ax in drawn["fig"].get_axes() if ax.get_xlabel()]
    budgets = {ax.get_xlabel(): [line.get_label() for line in ax.get_lines()
                                 if list(line.get_xdata()) == [25, 25]] for ax in axes}
    assert budgets == {"p99 latency (ms)": ["p99 budget 25 ms"], "avg latency (ms)": []}


@pytest.mark.parametrize("folder, lead, other", [
    ("bert/h100/ts-trace_fp16", "system", "cuda"),  # CUDA faster at batch 16
    ("fastpitch/h100/aoti-2026-11-25/aoti_fp16", "none", "cuda"),  # no shared memory: FastPitch's
])
def test_a_headline_leads_with_the_references_shared_memory_mode(folder, lead, other):
    """No reference used CUDA shared memory: its figure stands beside the comparable one,
    never in its place, even where it is the larger (both committed folders)."""
    from deploybench.records.tables import read_perf
    from deploybench.reporting.headline import offline_text, ratio_text

    folder = ROOT / "results" / folder
    table = read_perf(folder / "offline.csv")
    best = {mode: rows.loc[rows[THROUGHPUT].idxmax()]
            for mode, rows in table.groupby(SHARED_MEMORY)}
    assert best[other][THROUGHPUT] > best[lead][THROUGHPUT]  # the larger is not the lead
    facts = headline_of(folder)
    assert offline_text(facts) == (
        f"{best[lead][THROUGHPUT]:,.0f} inf/s at batch {best[lead]['Batch']}, {lead} shared "
        f"memory ({best[other][THROUGHPUT]:,.0f} in {other} shared memory)")
    from deploybench.reporting.model_report import _configuration_row

    row = _configuration_row(folder / "README.md")  # the model table's line, as led
    assert (row["Best offline inf/s"], row["in shared memory"]) == (
        best[lead][THROUGHPUT], lead)
    assert row["other shared memory"] == f"{other} {best[other][THROUGHPUT]:,.0f}"
    if (folder / "native.csv").is_file():
        ratio = served_vs_native(folder / "offline.csv", folder / "native.csv")
        top = ratio[(ratio["Batch"] == ratio["Batch"].max()) & (ratio[SHARED_MEMORY] == lead)]
        assert ratio_text(facts).startswith(f"{top['served/native'].iloc[0]:.3g} at batch")
        assert ratio_text(facts).endswith(f"({lead} shared memory)")


def test_a_folder_whose_scenarios_ran_apart_says_so_in_its_headlines(tmp_path):
    """FastPitch's H200 FP32 folder: offline on a 16-core host, online on a 64-core one of
    another run; the same folder with online's provenance made offline's is one run."""
    import shutil

    folder = tmp_path / "h200/ts-trace_fp32"
    shutil.copytree(ROOT / "results/fastpitch/h200/ts-trace_fp32", folder)
    offline = json.loads((folder / "offline.json").read_text())["provenance"]
    online = json.loads((folder / "online.json").read_text())["provenance"]
    assert (offline["cpus"], online["cpus"]) == (16, 64)
    facts = headline_of(folder)
    said = ("offline and online measured apart (2 devices of 2 machines, 2 versions of the "
            f"code): offline on {offline['device'][:12]} of a 16-core host, code "
            f"{offline['project']['code'][:8]}; online on {online['device'][:12]} of a "
            f"64-core host, code {online['project']['code'][:8]}")
    assert facts["apart"] == said
    assert f"- **Measured apart**: {said}" in configuration_lines(facts, "deploybench backend")
    line = model_lines({"h200 ts-trace_fp32": facts})
    assert line.splitlines()[0].endswith(f"; {said}")
    assert "its scenarios measured apart" in line.splitlines()[-1]
    ran = json.loads((folder / "online.json").read_text())
    (folder / "online.json").write_text(formats.text({**ran, "provenance": offline}))
    facts = headline_of(folder)
    assert facts["apart"] is None
    assert "apart" not in configuration_lines(facts, "x") + model_lines({"a": facts})
