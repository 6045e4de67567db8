"""Beside a published table, only what was measured as its document measured: every column
of every committed model report checked here against the document's parsed parameters
(config/reference/tables.csv) and its runner's settings (the model config's scenarios,
which test_reference_settings.py holds to the documents' commands), read independently of
the report's own check (deploybench.reporting.protocol), which is tested on wrong answers."""

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from deploybench.records import formats
from testkit.workflow import ROOT

TABLES = ROOT / "config/reference/tables.csv"
# The folders issue 63 found off their documents' protocol, where they are kept now
OFF_PROTOCOL = ["tft/h100/first-runs-2026-11-22/ts-script_fp16",
                "tft/h100/first-runs-2026-11-22/ts-script_fp32",
                "tft/h100/first-runs-2026-11-22/ts-trace-cg_fp16",
                "tft/h100/first-runs-2026-11-22/ts-trace_fp16",
                "bert/h100/first-runs-2026-11-22/ts-trace-cg_fp16"]
REFERENCED = [p.stem for p in sorted((ROOT / "config/models").glob("*.yaml"))
              if (yaml.safe_load(p.read_text()).get("reference") or {}).get("pairs")]


def _published(model: dict) -> pd.DataFrame:
    reference = model["reference"]
    rows = pd.read_csv(TABLES, low_memory=False)
    rows = rows[rows["document"] == reference["document"]]
    for column, value in (reference.get("where") or {}).items():
        rows = rows[rows[column].astype(str).isin({str(value), f"{value}.0"})]
    return rows


def _stated(rows: pd.DataFrame, column: str) -> set[str]:
    """The values a document's tables state for a parameter, as text (1024.0 -> 1024)."""
    return {f"{v:g}" if isinstance(v, float) else str(v)
            for v in rows[column].dropna().unique() if str(v) != "-"}


def off_protocol(folder: Path, model_name: str) -> list[str]:
    """What of a folder's recorded settings is not its document's, read here on its own:
    the parameters the published tables state, and the runner's perf_analyzer settings
    (protocol, window, warm-up windows, its shared-memory mode) where they state none."""
    model = yaml.safe_load((ROOT / f"config/models/{model_name}.yaml").read_text())
    rows = _published(model)
    found = []
    for scenario in sorted(set(rows["scenario"])):
        path = folder / f"{scenario}.json"
        if not path.is_file():
            continue
        ran = json.loads(path.read_text())
        perf, triton = ran["perf_analyzer_settings"], ran["triton"]
        recorded = {
            "max_batch_size": str(triton["max_batch_size"]),
            "number_of_model_instances": str(triton["instances"]),
            "triton_max_queue_delay": f"{triton['max_queue_delay_us']:g}",
            "triton_preferred_batch_sizes": " ".join(map(str, triton["preferred_batch_sizes"])),
            "export_precision": ran.get("export_precision", "fp32").upper()}
        if perf.get("measurement_mode") != "time_windows":
            recorded["request_count"] = str(perf["measurement_request_count"])
        for column, value in recorded.items():
            stated = _stated(rows, column) if scenario == "offline" else set()
            if stated and value not in stated:
                found.append(f"{scenario} {column} {value} not {stated}")
        runner = model[scenario]
        modes = perf.get("shared_memory", "system")
        modes = [modes] if isinstance(modes, str) else modes
        document = {"protocol": runner.get("protocol", "grpc" if scenario == "offline"
                                           else "http"),
                    "warmup_windows": runner.get("warmup_windows", 0)}
        for key, value in document.items():
            if perf.get(key, 0) != value:
                found.append(f"{scenario} {key} {perf.get(key, 0)} not {value}")
        mode = runner.get("shared_memory", "system") if scenario == "offline" else "none"
        if mode not in modes:
            found.append(f"{scenario} shared memory {modes} without {mode}")
        windowed = runner.get("measurement_mode") == "time_windows"
        if windowed and perf.get("measurement_interval_ms") != runner["measurement_interval_ms"]:
            found.append(f"{scenario} windows {perf.get('measurement_interval_ms')} ms")
        count, document_count = perf["measurement_request_count"], runner[
            "measurement_request_count"]
        # online, perf.min_requests may lengthen a window (every request's tail), never
        # shorten it
        if not windowed and (count < document_count if scenario == "online"
                             else count != document_count):
            found.append(f"{scenario} windows of {count} requests")
    return found


def columns_of(readme: Path) -> set[Path]:
    """The folders of the measured columns a model report puts beside the published tables
    (its throughput tables' headers: `<gpu> <configuration> (notes)`)."""
    text = readme.read_text()
    folders = set()
    for section in re.findall(r"## \w+: inferences/second beside the published tables\n\n"
                              r".*?\n\n(\|.*?)\n", text, re.S):
        for label in (cell.strip() for cell in section.strip("|").split("|")[2:]):
            if not label.endswith("(reference)"):
                gpu, where = label.split(" (")[0].split(" ", 1)
                folders.add(readme.parent / gpu / where)
    return folders


@pytest.mark.parametrize("model", REFERENCED)
def test_every_column_beside_a_published_table_ran_its_documents_protocol(model):
    columns = columns_of(ROOT / f"results/{model}/README.md")
    assert columns or model == "widedeep", model  # W&D: CPU rows only, none as its document
    for folder in columns:
        assert (folder / "offline.json").is_file(), folder
        assert off_protocol(folder, model) == [], folder
    assert not {ROOT / "results" / f for f in OFF_PROTOCOL} & columns


@pytest.mark.parametrize("folder", OFF_PROTOCOL)
def test_the_check_finds_the_folders_measured_off_their_documents_protocol(folder):
    """The committed test above holds only if its check fails these: issue 63's five."""
    model = folder.split("/")[0]
    found = off_protocol(ROOT / "results" / folder, model)
    if model == "tft":  # its tables state 500 requests; its runner speaks HTTP, warms up
        assert {"offline request_count 100 not {'500'}", "offline protocol grpc not http",
                "offline warmup_windows 0 not 2", "online warmup_windows 0 not 2"} <= set(
                    found), found
    else:  # BERT's tables state no window: its runner's 50 requests are the protocol
        assert found == ["offline windows of 500 requests"], found


def test_the_reports_check_names_each_difference_and_passes_the_documents_settings(tmp_path):
    import yaml as yml

    from deploybench.reporting.protocol import differences
    from deploybench.settings.resolve import Settings

    reference = Settings(yml.safe_load((ROOT / "config/config.yaml").read_text())).reference(
        "tft")
    folder = tmp_path / "tft/h100/ts-trace_fp32"
    shutil.copytree(ROOT / "results/tft/h100/ts-trace_fp32", folder)
    assert differences(folder, reference) == []
    ran = json.loads((folder / "offline.json").read_text())
    original = json.dumps(ran)
    for change, said in (
            ({"perf_analyzer_settings": {"measurement_request_count": 475}},
             "Request count (offline): 475 (the document's: 500)"),  # 5 % short
            ({"perf_analyzer_settings": {"protocol": "grpc"}},
             "Protocol (offline): GRPC (the document's: HTTP)"),
            ({"perf_analyzer_settings": {"shared_memory": ["cuda"]}},
             "Shared memory (offline): cuda (the document's: system)"),
            ({"perf_analyzer_settings": {"warmup_windows": 0}},
             "Warm-up (offline): none (the document's: windows of 1000 requests at batch 1 x "
             "concurrency 1, batch max x concurrency 1)"),
            ({"triton": {"max_batch_size": 512}},
             "Max batch size: 512 (the document's: 1024)"),
            ({"triton": {"instances": 1}}, "Number of model instances: 1 (the document's: 2)"),
            ({"export_precision": "fp16"}, "Export precision: FP16 (the document's: FP32)")):
        changed = json.loads(original)
        for key, value in change.items():
            changed[key] = {**changed[key], **value} if isinstance(value, dict) else value
        (folder / "offline.json").write_text(formats.text(changed))
        assert differences(folder, reference) == [said], change
    (folder / "offline.json").write_text(original)
    online = json.loads((folder / "online.json").read_text())
    online["perf_analyzer_settings"]["protocol"] = "grpc"
    (folder / "online.json").write_text(formats.text(online))
    assert differences(folder, reference) == [
        "Protocol (online): GRPC (the document's: HTTP)"]


def test_a_set_measured_alone_stands_beside_the_tables_before_one_beside_a_neighbour(
        tmp_path):
    """BERT's H200 column is the newest alone pass; a `together/` pass newer than every
    alone one is still passed over, and taken only where no alone measurement exists."""
    from deploybench.reporting.reference import sets_beside

    assert ROOT / "results/bert/h200/side-by-side-again-2026-11-27/again/ts-trace_fp16" in \
        columns_of(ROOT / "results/bert/README.md")
    shutil.copytree(ROOT / "results/bert/h100/ts-trace_fp16", tmp_path / "h100/ts-trace_fp16")
    source = ROOT / "results/bert/h200/side-by-side-again-2026-11-27"
    for way, date in (("alone", "2026-11-27T01:00:00"), ("together", "2026-11-28T01:00:00")):
        shutil.copytree(source / way, tmp_path / f"h200/side-2026-11-27/{way}")
        ran_at = tmp_path / f"h200/side-2026-11-27/{way}/ts-trace_fp16/offline.json"
        ran = json.loads(ran_at.read_text())
        ran["provenance"]["date"] = date + "+00:00"
        ran_at.write_text(formats.text(ran))
    (tmp_path / "h200/side-2026-11-27/NOTES.md").write_text("# side by side\n")
    configs = [tmp_path / "h100/ts-trace_fp16/README.md"]
    sets = [tmp_path / "h200/side-2026-11-27"]
    assert sets_beside(configs, sets) == [
        tmp_path / "h200/side-2026-11-27/alone/ts-trace_fp16/README.md"]
    shutil.rmtree(tmp_path / "h200/side-2026-11-27/alone")
    assert sets_beside(configs, sets) == [
        tmp_path / "h200/side-2026-11-27/together/ts-trace_fp16/README.md"]


@pytest.mark.parametrize("model", sorted(p.name for p in (ROOT / "results").iterdir()
                                         if (p / "README.md").is_file()))
def test_the_committed_model_reports_are_what_the_report_step_makes_of_the_files(
        model, monkeypatch):
    """Each committed model report and headline, regenerated from the committed files with
    the model_report rule's spec (its plots not drawn): byte for byte, so none is edited by
    hand and none is stale."""
    from deploybench.reporting import model_report
    from deploybench.settings.resolve import Settings

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    monkeypatch.setattr(model_report, "frontier_plot", lambda *args: None)
    folder = ROOT / "results" / model
    spec = {"model": model, "title": settings.models[model]["title"],
            "reference": settings.reference(model)}
    lines, text = model_report.model_page(spec, [], folder / "README.md",
                                          folder / "plots/offline_frontier.png",
                                          folder / "plots/online_frontier.png")
    assert (folder / "headline.md").read_text() == lines + "\n"
    assert (folder / "README.md").read_text() == text


@pytest.mark.parametrize("model", REFERENCED)
def test_each_report_says_where_a_columns_gpu_and_serving_differ_from_the_tables(model):
    """BERT's and FastPitch's reports too: every column beside the published tables has
    its GPU and serving backend (from its offline.json) against the published rows'."""
    from deploybench.reporting.beside import NOT_A_REPRODUCTION

    text = (ROOT / f"results/{model}/README.md").read_text()
    columns = columns_of(ROOT / f"results/{model}/README.md")
    if not columns:
        assert "## Other hardware, other serving" not in text
        return
    section = text.split("## Other hardware, other serving\n\n")[1].split("\n\n## ")[0]
    published = sorted(set(_published(yaml.safe_load(
        (ROOT / f"config/models/{model}.yaml").read_text()))["gpu"]))
    assert section.startswith(f"The published rows ran on {', '.join(published)};")
    assert NOT_A_REPRODUCTION in section and NOT_A_REPRODUCTION in text.split(
        "## Offline: inferences/second beside the published tables")[1]
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")
            for line in section.splitlines() if line.startswith("| ") and "---" not in line}
    for folder in columns:
        prov = json.loads((folder / "offline.json").read_text())["provenance"]
        label = f"{folder.relative_to(ROOT / 'results' / model).parts[0]} " + "/".join(
            folder.relative_to(ROOT / "results" / model).parts[1:])
        cells = rows[label]
        assert cells[1] == prov["gpus"][0]["name"] and prov["gpus"][0]["name"] not in published
        assert cells[3].rstrip(" |") == "GPU and serving backend", cells
