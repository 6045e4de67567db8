"""The reference documents' published tables, as the reports show them beside ours: a
document's section parsed from text, malformed tables refused by name, the committed tables
read beside the measured ones (the documents themselves: test_reference_documents.py)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import reference_tables

from deploybench.records import formats

ROOT = Path(__file__).resolve().parents[2]


LINEAR = ["Offline: NVIDIA T4, PyTorch with FP16, Dataset: x", reference_tables.INTRO,
          "Parameter Name", "Parameter Value", "GPU", "NVIDIA T4", "Results Table",
          "Batch", "Concurrency", "Inferences/Second", "avg latency (ms)"]


def test_linear_section(tmp_path):
    path = tmp_path / "ok.txt"
    path.write_text("\n".join(["Deploying the X model on Triton", *LINEAR,
                               "1", "1", "100.0", "10.0", "Caption of a plot"]))
    parsed = reference_tables.parse_document(path)
    assert parsed["model"].tolist() == ["X"] and parsed["gpu_key"].tolist() == ["t4"]
    assert parsed["avg latency (ms)"].tolist() == [10.0]


def test_malformed_linear_table_names_the_section(tmp_path):
    (tmp_path / "bad.txt").write_text("\n".join([*LINEAR, "1", "1", "100.0"]))
    with pytest.raises(ValueError, match="section 'Offline: NVIDIA T4, PyTorch with FP16, "
                                         "Dataset: x': 3 values"):
        reference_tables.parse_document(tmp_path / "bad.txt")


def test_malformed_markdown_row_names_the_section(tmp_path):
    text = """# Deploying the X model on Triton
#### Online: NVIDIA A30, ONNX Runtime with FP16
Our results were obtained using the following configuration:
| Parameter Name | Parameter Value |
|:---|:---|
| GPU | NVIDIA A30 |
<summary>Results Table</summary>
| Batch | Concurrency | Inferences/Second | avg latency (ms) |
|---:|---:|---:|---:|
| 1 | 1 | 100.0 | 10.0 |
| 1 | 2 | 200.0 |
"""
    (tmp_path / "bad.txt").write_text(text)
    with pytest.raises(ValueError, match="section 'Online: NVIDIA A30, ONNX Runtime with "
                                         "FP16': a row of 3 cells under 4 headers"):
        reference_tables.parse_document(tmp_path / "bad.txt")


def test_committed_gpu_results_sit_beside_the_published_rows():
    from deploybench.reporting.reference import reference_comparison

    configs = sorted((ROOT / "results" / "tft" / "h100").glob("*/README.md"))
    table = reference_comparison(configs, ROOT / "config/reference/tables.csv",
                                 "002_86a4b5901d69b16e.txt", {"dataset": "electricity"}, "offline")
    row = table.set_index("Batch").loc[1024]
    assert row["a100 NVIDIA TensorRT FP16 (reference)"] == 54061.8
    assert row["a100 PyTorch FP16 (reference)"] == 25159.9
    measured = pd.read_csv(ROOT / "results/tft/h100/ts-trace_fp32/offline.csv")
    system = measured[measured["Shared memory"] == "system"].set_index("Batch")
    # the reference's mode leads: the system column has no mode note, CUDA's its own
    assert row["h100 ts-trace_fp32 (served by deploybench)"] == \
        system.loc[1024, "Inferences/Second"]
    assert "h100 ts-trace_fp32 (cuda shm; served by deploybench)" in table
    # nothing published online in BERT's document: no online table beside it
    assert reference_comparison(
        sorted((ROOT / "results/bert/h100").glob("*/README.md")),
        ROOT / "config/reference/tables.csv", "004_0e3f950e04427afa.txt", {}, "online").empty


def test_numeric_filters_match_the_tables_numbers():
    """FastPitch narrows its document by sequence_length: 128 in YAML, 128.0 in the CSV."""
    from deploybench.reporting.reference import reference_comparison

    configs = sorted((ROOT / "results" / "fastpitch" / "h100").glob("*/README.md"))
    table = reference_comparison(configs, ROOT / "config/reference/tables.csv",
                                 "001_a05501836336c82b.txt", {"sequence_length": 128}, "offline")
    reference_columns = [c for c in table.columns if c.endswith("(reference)")]
    assert "a100 PyTorch FP16 (reference)" in reference_columns and len(reference_columns) == 8
    assert table[reference_columns].notna().all().all()


def test_the_model_report_lists_where_a_model_is_not_run_as_its_reference(tmp_path):
    import yaml

    from deploybench.settings.resolve import Settings
    from deploybench.steps.report import model_report

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    reference = settings.reference("bert")
    configs = sorted((ROOT / "results" / "bert" / "h100").glob("*/README.md"))
    out = tmp_path / "README.md"
    model_report({"model": "bert", "title": "BERT", "reference": reference}, configs, out,
                 tmp_path / "plots/offline_frontier.png", tmp_path / "plots/online_frontier.png")
    text = out.read_text()
    for scenario in ("offline", "online"):
        assert f"![{scenario} frontier](plots/{scenario}_frontier.png)" in text
        png = (tmp_path / f"plots/{scenario}_frontier.png").read_bytes()
        assert png[:4] == b"\x89PNG"
    section = text.split("## Where this model is not run as its reference ran it\n\n")[1]
    listed = [line[2:] for line in section.split("\n\n")[0].splitlines()]
    assert listed == reference["differences"]
    assert not any("once per batch size" in item for item in listed)  # reproduced now
    assert "## Offline: inferences/second beside the published tables" in text
    assert ("| ONNX Runtime + NVIDIA TensorRT FP16 | ort-trt_fp16 | a100, a30, t4, v100 |"
            in text)
    # the published F1 beside the one measured on Triton
    assert "| f1 | ONNX Runtime FP16 (reference) | 83.37 |" in text
    assert "| f1 | NVIDIA TensorRT FP16 (reference) | 83.34 / 83.35 |" in text
    for readme in configs:
        accuracy = pd.read_csv(readme.parent / "accuracy.csv").set_index("name")
        f1 = accuracy.loc["f1", "triton"]
        assert f"| f1 | h100 {readme.parent.name} | {f1:.4g} |" in text


def test_latencies_sit_beside_the_published_ones_on_batch_and_concurrency():
    from deploybench.records.tables import COMPONENTS, read_perf
    from deploybench.reporting.reference import reference_latencies

    folder = ROOT / "results/tft/h100/first-runs-2026-11-22/ts-trace-cg_fp16"
    tables = ROOT / "config/reference/tables.csv"
    for scenario in ("offline", "online"):
        table = reference_latencies([folder / "README.md"], tables,
                                    "002_86a4b5901d69b16e.txt", {"dataset": "electricity"},
                                    scenario)
        published = pd.read_csv(tables, low_memory=False)
        published = published[(published["document"] == "002_86a4b5901d69b16e.txt")
                              & (published["dataset"] == "electricity")
                              & (published["scenario"] == scenario)]
        pairs = set(zip(published["batch"], published["concurrency"]))
        assert set(zip(table["Batch"], table["Concurrency"])) <= pairs
        ours = table[table["Configuration"]
                    == "h100 first-runs-2026-11-22/ts-trace-cg_fp16 (served by python)"]
        measured = read_perf(folder / f"{scenario}.csv")
        measured = measured[[(b, c) in pairs for b, c in
                             zip(measured["Batch"], measured["Concurrency"])]]
        assert len(ours) == len(measured) > 0
        # ours: the components summed, as the references' "avg latency"
        assert np.allclose(ours["avg latency (ms)"], measured[COMPONENTS].sum(axis=1), atol=2e-3)
        row = table[(table["Configuration"] == "a100 NVIDIA TensorRT FP16 (reference)")
                    & (table["Batch"] == 16) & (table["Concurrency"] == 1 if scenario ==
                                                "offline" else table["Concurrency"] == 8)]
        source = published[(published["gpu_key"] == "a100")
                           & (published["backend"] == "NVIDIA TensorRT")
                           & (published["batch"] == 16)
                           & (published["concurrency"] == (1 if scenario == "offline" else 8))]
        assert row["avg latency (ms)"].tolist() == source["avg latency (ms)"].tolist()


def test_settings_of_the_published_tables_sit_beside_what_ran():
    from deploybench.reporting.reference import reference_settings

    folder = ROOT / "results/tft/h100/first-runs-2026-11-22/ts-trace-cg_fp16"
    table = reference_settings([folder / "README.md"], ROOT / "config/reference/tables.csv",
                               "002_86a4b5901d69b16e.txt", {"dataset": "electricity"})
    table = table.set_index("Setting")
    trt = [c for c in table.columns if "NVIDIA TensorRT" in c]
    assert len(trt) == 1 and trt[0].count("NVIDIA TensorRT FP16") == 4  # one column, 4 GPUs
    assert table.loc["TensorRT CUDA graphs", trt[0]] == "Disabled"  # what the table states
    ran = json.loads((folder / "offline.json").read_text())
    ours = table["h100 first-runs-2026-11-22/ts-trace-cg_fp16"]
    assert ours["Max batch size"] == str(ran["triton"]["max_batch_size"]) == "1024"
    assert ours["Request count (offline)"] == str(
        ran["perf_analyzer_settings"]["measurement_request_count"])
    assert ours["TensorRT CUDA graphs"] == ""  # not a TensorRT configuration
    # written before exports had a precision: FP32, as migrate_results.py recorded it
    assert ran["export_precision"] == "fp32" and ours["Export precision"] == "FP32"
    # time windows (FastPitch's document): their length, no request count
    folder = ROOT / "results" / "fastpitch" / "h100" / "ts-trace_fp16"
    table = reference_settings([folder / "README.md"], ROOT / "config/reference/tables.csv",
                               "001_a05501836336c82b.txt", {"sequence_length": 128})
    ours = table.set_index("Setting")["h100 ts-trace_fp16"]
    ran = json.loads((folder / "offline.json").read_text())["perf_analyzer_settings"]
    assert ran["measurement_mode"] == "time_windows" and ours["Request count (offline)"] == ""
    assert ours["Windows (offline)"] == f"{ran['measurement_interval_ms'] / 1000:g} s windows"
    assert ours["Warm-up (online)"] == ours["Protocol (online)"] == ""  # no online.json
    # the online runner's settings from online.json, beside the offline one's: FastPitch's
    # warms at concurrency max/2 and max in six of its 10-s windows; TFT's online shares
    # no memory where its offline did
    folder = ROOT / "results" / "fastpitch" / "h200" / "ts-trace_fp16"
    table = reference_settings([folder / "README.md"], ROOT / "config/reference/tables.csv",
                               "001_a05501836336c82b.txt", {"sequence_length": 128})
    ours = table.set_index("Setting")["h200 ts-trace_fp16"]
    assert ours["Warm-up (online)"] == ("3 windows of 60 s at batch 1 x concurrency max/2, "
                                        "batch 1 x concurrency max")
    assert ours["Warm-up (offline)"] == ("3 windows of 60 s at batch 1 x concurrency 8, "
                                         "batch 1 x concurrency 16")
    assert (ours["Protocol (online)"], ours["Windows (online)"]) == ("HTTP", "10 s windows")
    folder = ROOT / "results/tft/h100/first-runs-2026-11-22/ts-trace-cg_fp16"
    table = reference_settings([folder / "README.md"], ROOT / "config/reference/tables.csv",
                               "002_86a4b5901d69b16e.txt", {"dataset": "electricity"})
    ours = table.set_index("Setting")["h100 first-runs-2026-11-22/ts-trace-cg_fp16"]
    assert (ours["Shared memory (offline)"], ours["Shared memory (online)"]) == (
        "system", "none")


def test_reports_show_the_export_precision_a_configuration_ran(tmp_path):
    """offline.json records it (a measurement without it predates FP16 exports: FP32); the
    model report's Export column and the settings beside the published ones read it."""
    import shutil

    from deploybench.reporting.reference import reference_settings
    from deploybench.steps.report import model_report

    folder = tmp_path / "bert" / "h100" / "trt_fp16"
    shutil.copytree(ROOT / "results" / "bert" / "h100" / "ts-trace_fp16", folder)
    ran = json.loads((folder / "offline.json").read_text())
    (folder / "offline.json").write_text(formats.text({**ran, "export_precision": "fp16"}))
    table = reference_settings([folder / "README.md"], ROOT / "config/reference/tables.csv",
                               "004_0e3f950e04427afa.txt", {})
    assert table.set_index("Setting").loc["Export precision", "h100 trt_fp16"] == "FP16"
    out = tmp_path / "bert" / "README.md"
    model_report({"model": "bert", "title": "BERT", "reference": None}, [], out,
                 tmp_path / "bert/plots/offline.png", tmp_path / "bert/plots/online.png")
    rows = [line for line in out.read_text().splitlines() if "](h100/" in line]
    header = next(line for line in out.read_text().splitlines() if "| Export |" in line)
    assert [c.strip() for c in header.split("|")][1:4] == ["GPU", "Configuration", "Export"]
    assert [row.split("|")[3].strip() for row in rows] == ["FP16"]


def test_frontier_lines_are_the_measured_sweeps_beside_the_published_ones():
    """Each configuration's sweep in order, its average latency the components' sum; an
    H100 (no published row of its own) beside every published table, dashed."""
    import yaml

    from deploybench.records.tables import COMPONENTS, read_perf
    from deploybench.reporting.reference import frontier_lines
    from deploybench.settings.resolve import Settings

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    folder = ROOT / "results/tft/h100/first-runs-2026-11-22/ts-trace-cg_fp16"
    for scenario, order in (("offline", "Batch"), ("online", "Concurrency")):
        lines = frontier_lines([folder / "README.md"], settings.reference("tft"), scenario)
        ours = [rows for gpu, label, published, rows in lines
                if label == "h100 first-runs-2026-11-22/ts-trace-cg_fp16 (served by python)"]
        assert len(ours) == 1 and list(ours[0][order]) == sorted(ours[0][order])
        measured = read_perf(folder / f"{scenario}.csv").sort_values(order)
        assert np.allclose(ours[0]["Inferences/Second"], measured["Inferences/Second"])
        assert np.allclose(ours[0]["avg latency (ms)"], measured[COMPONENTS].sum(axis=1),
                           atol=2e-3)
        published = [(gpu, label) for gpu, label, dashed, _ in lines if dashed]
        assert all(gpu == "h100" for gpu, _ in published)
        labels = {label for _, label in published}
        assert "a100 NVIDIA TensorRT FP16 (reference)" in labels and len(labels) == len(published)
        assert {label.split()[0] for label in labels} == {"a30", "a100", "v100", "t4"}


def test_the_model_report_lists_the_dated_sets_with_what_each_measured():
    """The committed H100 sets beside TFT's configuration folders: a row per configuration
    of a set with its best figures from its own tables, a probe without one in one row."""
    from deploybench.reporting.model_report import dated_sets_table

    sets = dated_sets_table(ROOT / "results/tft/README.md")
    online = sets[sets["Set"].str.startswith("[online-2026-11-24]")].iloc[0]
    table = pd.read_csv(ROOT / "results/tft/h100/online-2026-11-24/torch-compile_fp16/online.csv")
    assert online["Online max inf/s"] == table["Inferences/Second"].max() > 80_000
    assert pd.isna(online["Best offline inf/s"])  # that set measured online only
    assert online["What"].startswith("TFT electricity FP16 `torch-compile` online")
    probe = sets[sets["Set"].str.startswith("[aoti-2026-11-24]")]
    assert len(probe) == 1 and probe.iloc[0]["Configuration"] == ""
    keys = {p.parent.parent.name for p in (ROOT / "results/tft").glob("*/*/NOTES.md")}
    assert set(sets["GPU"]) == keys >= {"h100", "cpu"}  # each key with a set, no other
    for gpu in keys:  # each set has notes: a set's rows, every set on disk
        on_disk = list((ROOT / f"results/tft/{gpu}").glob("*/NOTES.md"))
        least = {"h100": 7, "cpu": 2}.get(gpu, 1)
        assert len(set(sets[sets["GPU"] == gpu]["Set"])) == len(on_disk) >= least, gpu
    compiled = sets[sets["Set"].str.startswith("[aoti-cg-2026-11-24]")].iloc[0]
    table = pd.read_csv(ROOT / "results/tft/h100/aoti-cg-2026-11-24/aoti-cg_fp16/offline.csv")
    assert compiled["Best offline inf/s"] == table["Inferences/Second"].max() > 130_000


def test_the_other_sides_of_a_pair_stand_beside_the_published_rows(tmp_path):
    """Beside BERT's natively served reference pair, the newest dated set that measured the
    same configuration as its folder did but through the python backend, and on a GPU key
    with no folder of that name, the newest of each way (one without an online table among
    them); an older such set, one served the same way on the folder's key, one measured
    otherwise offline or online, and one on a key that has a folder of that name, served as
    that folder is, stay out."""
    import shutil

    from deploybench.reporting.reference import reference_comparison, sets_beside

    bert = ROOT / "results/bert/h100"
    folder = bert / "ts-trace_fp16"
    shutil.copytree(folder, tmp_path / "h100/ts-trace_fp16")
    shutil.copytree(folder, tmp_path / "h300/ts-trace_fp16")  # another key's folder
    python = bert / "python-served-2026-11-27"
    for where, date, settings, source in (
            ("h100/old-2026-11-01", "2026-11-01", {}, python),
            ("h100/new-2026-11-02", "2026-11-02", {}, python),
            ("h100/grpc-2026-11-03", "2026-11-03", {"measurement_request_count": 500}, python),
            ("h100/same-2026-11-04", "2026-11-04", {}, folder),
            ("h200/python-2026-11-05", "2026-11-05", {}, python),  # no folder on h200
            ("h200/native-2026-11-06", "2026-11-06", {}, folder),
            ("h300/same-2026-11-07", "2026-11-07", {}, folder),  # served as h300's folder
            ("h100/online-2026-11-08", "2026-11-08", {"online": {"protocol": "grpc"}}, python),
            ("h200/offline-2026-11-09", "2026-11-09", {"online": None}, python)):
        if source == folder:  # a configuration folder: into a set of its own
            shutil.copytree(source, tmp_path / where / "ts-trace_fp16")
        else:
            shutil.copytree(source, tmp_path / where)
        (tmp_path / where / "NOTES.md").write_text(f"# {where}\n")
        ran_at = tmp_path / where / "ts-trace_fp16/offline.json"
        ran = json.loads(ran_at.read_text())
        ran["provenance"]["date"] = f"{date}T00:00:00+00:00"
        online = settings.pop("online", {})
        ran["perf_analyzer_settings"] |= settings
        ran_at.write_text(formats.text(ran))
        online_at = ran_at.with_name("online.json")
        if online is None:  # offline only
            online_at.unlink()
            online_at.with_suffix(".csv").unlink()
        elif online:
            ran = json.loads(online_at.read_text())
            ran["perf_analyzer_settings"] |= online
            online_at.write_text(formats.text(ran))
    configs = [tmp_path / f"{key}/ts-trace_fp16/README.md" for key in ("h100", "h300")]
    sets = sorted(p.parent for p in tmp_path.glob("*/*/NOTES.md"))
    beside = sets_beside(configs, sets)
    assert beside == [tmp_path / f"{where}/ts-trace_fp16/README.md" for where in
                      ("h100/new-2026-11-02", "h200/native-2026-11-06",
                       "h200/offline-2026-11-09")], beside
    table = reference_comparison(configs[:1] + beside, ROOT / "config/reference/tables.csv",
                                 "004_0e3f950e04427afa.txt", {}, "offline")
    measured = pd.read_csv(python / "ts-trace_fp16/offline.csv")
    system = measured[measured["Shared memory"] == "system"].set_index("Batch")
    for label in ("h100 new-2026-11-02", "h200 offline-2026-11-09"):
        column = table.set_index("Batch")[f"{label}/ts-trace_fp16 (served by python)"]
        assert np.allclose(column.loc[system.index], system["Inferences/Second"])
    assert "h100 ts-trace_fp16 (served by deploybench)" in table
    assert "h200 native-2026-11-06/ts-trace_fp16 (served by deploybench)" in table


def test_cpu_results_are_named_with_how_they_ran_otherwise_not_put_beside(tmp_path):
    """DLRM's CPU configurations ran the CPU key's smaller sweep (max batch 4,096 where the
    document's tables state 65,536): no table puts them beside the published rows, the
    report names each with its differences, and its H200 columns stand there alone."""
    import yaml

    from deploybench.settings.resolve import Settings
    from deploybench.steps.report import model_report

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    configs = sorted((ROOT / "results" / "dlrm").glob("*/*/README.md"))
    assert {c.parent.parent.name for c in configs} == {"cpu", "h200"}
    out = tmp_path / "README.md"
    model_report({"model": "dlrm", "title": "DLRM", "reference": settings.reference("dlrm")},
                 configs, out, tmp_path / "off.png", tmp_path / "on.png")
    text = out.read_text()
    otherwise = text.split("## Measured otherwise: not beside the published tables\n\n")[1]
    named = [line for line in otherwise.split("\n\n")[1].splitlines()]
    for readme in (c for c in configs if c.parent.parent.name == "cpu"):
        ran = json.loads((readme.parent / "offline.json").read_text())
        line = next(n for n in named if n.startswith(f"- **cpu {readme.parent.name}**"))
        assert (f"Max batch size: {ran['triton']['max_batch_size']} (the document's: 65536)"
                in line), line
    section = text.split("## Offline: inferences/second beside the published tables\n\n")[1]
    header = section.split("\n\n")[1].splitlines()[0]
    assert "cpu " not in header and "h200 hps-onnx_fp16 (served by ensemble)" in header
    assert "a100 NVDIA Merlin HPS + NVIDIA TensorRT FP16 (reference)" in header
    assert "| Warm-up (offline) |" in text
