"""Snakemake's HTML report of the tiny build: every result of a configuration, each model's
line opened with what to ship, named targets' and a partly built workflow's."""

import io
import json
import re
from pathlib import Path

import pandas as pd
import PIL.Image
import yaml

from testkit.pipeline import RUN
from testkit.workflow import TINY, snakemake


def test_html_report_shows_every_result_of_a_configuration(built, tmp_path, chromium):
    """`snakemake --report` on the build, opened in headless Chromium: a configuration's
    report, tables and plots and its model's are listed by label, described by their
    captions, and every image loads, in the report and in the README pages it frames."""
    report = tmp_path / "report.html"
    snakemake(built, "--report", str(report))
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report.as_uri())

    def listed() -> list[str]:  # the labels of the subcategory shown
        return page.locator("nav tbody tr td:first-child").all_inner_texts()

    def row(label: str):
        return page.locator("nav tbody tr", has_text=label)

    def loaded(frame) -> list[int]:  # the naturalWidth of each <img> of a frame
        frame.wait_for_function("[...document.images].every(img => img.complete)")
        return frame.eval_on_selector_all("img", "imgs => imgs.map(img => img.naturalWidth)")

    def shown(label: str, name: str) -> None:  # a row's first button shows its image
        row(label).locator("a").first.click()
        image = page.locator("div.p-3 > img")
        assert f"filename={name};" in image.get_attribute("src"), label
        widths = loaded(page.main_frame)  # the report's logo and the image shown
        assert len(widths) == 2 and min(widths) > 0, (label, widths)

    def framed(label: str, title: str, images: int):  # a README page, in the report's frame
        row(label).locator("a").first.click()
        readme = page.locator("iframe").element_handle().content_frame()
        assert title in readme.inner_text("h1")
        widths = loaded(readme)
        assert len(widths) == images and all(width > 0 for width in widths), widths
        return readme

    page.get_by_role("link", name="Results", exact=True).click()  # (one model: one link)
    page.get_by_role("link", name="cpu/onnx_fp32", exact=True).click()
    plots = ("offline_latency", "offline_throughput", "online_latency", "online_tail")
    tables = ("accuracy", "conversion_check", "floor", "native", "offline", "online")
    assert set(listed()) >= {"report: README", "report: compare",
                             *(f"plot: {name.replace('_', ' ')}" for name in plots),
                             *(f"table: {name.replace('_', ' ')}" for name in tables)}
    for name in plots:
        shown(f"plot: {name.replace('_', ' ')}", f"{name}.png")
    readme = framed("report: README", "CPU only (the embedded default), ONNX Runtime with "
                    "FP32", images=4)
    assert readme.locator("th", has_text="Inferences/Second").count() >= 2  # tables as tables
    comparison = framed("report: compare", "Regression report: TFT (tiny", images=0)
    assert comparison.locator("th", has_text="baseline").count() >= 1  # its summary table
    screenshot = page.screenshot()
    row("table: offline").locator("a").nth(1).click()  # its description
    assert "Offline performance: static batching" in page.locator("nav").first.inner_text()
    assert page.evaluate("Object.values(results).every(result => result.caption)")

    page.get_by_role("link", name="tft-tiny", exact=True).click()
    page.get_by_role("link", name="all configurations", exact=True).click()
    assert set(listed()) == {"report: README", "report: compare", "plot: offline frontier",
                             "plot: online frontier"}
    shown("plot: online frontier", "online_frontier.png")
    framed("report: README", "TFT (tiny test configuration): results", images=2)
    # the front page: each model's headline, a README two clicks away (its entry, its button)
    page.goto(report.as_uri())
    front = page.locator("div.prose").first
    headline = (built / "results/tft-tiny/headline.md").read_text()
    assert "**cpu onnx_fp32**: offline " in headline and "- Fastest offline " in headline
    assert headline.splitlines()[0][2:].replace("**", "") in front.inner_text()
    front.get_by_role("link", name="cpu/onnx_fp32 README", exact=True).click()
    page.locator("nav table a").first.click()
    front_readme = page.locator("iframe").element_handle().content_frame()
    assert "ONNX Runtime with FP32" in front_readme.inner_text("h1")
    assert not errors, errors

    assert screenshot.startswith(b"\x89PNG\r\n\x1a\n")
    image = PIL.Image.open(io.BytesIO(screenshot)).convert("RGB")
    assert image.size == (1400, 1000) and len(image.getcolors(1 << 20)) > 100  # not blank
    (tmp_path / "report.png").write_bytes(screenshot)  # to look at after a failure


def test_html_report_opens_each_models_line_with_what_to_ship(built, tmp_path, chromium):
    """The front page: what to ship on each GPU key (the `ship` rule's page) before the
    model's reports, its page two clicks away, naming the online level that serves the most
    within the budget, as the online table gives it."""
    report = tmp_path / "report.html"
    snakemake(built, "--report", str(report))
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(report.as_uri())
    line = page.locator("div.prose").first.inner_text()
    assert line.index("cpu: what to ship") < line.index("its reports")
    page.locator("div.prose").first.get_by_role("link", name="cpu: what to ship",
                                                exact=True).click()
    page.locator("nav table a").first.click()
    ship = page.locator("iframe").element_handle().content_frame()
    assert ("What to ship: TFT (tiny test configuration) on cpu, p99 within 50 ms"
            in ship.inner_text("h1"))
    online = pd.read_csv(built / RUN / "online.csv")  # online first: its best within 50 ms
    best = online.loc[online["p99 latency (ms)"] <= 50, "Inferences/Second"].max()
    assert f"Ship onnx_fp32: {best:,.0f} inferences/s (online" in ship.inner_text("body")


def test_html_report_of_named_targets_lists_what_their_jobs_made(built, tmp_path):
    """Snakemake's way on a partly built workflow: a report of the targets named, here a
    configuration's README.md: its tables and plots, not the pages the default renders."""
    report = tmp_path / "partial.html"
    snakemake(built, "--report", str(report), f"{RUN}/README.md")
    listed = re.search(r'<script id="categories">\s*var categories = (.*);\n',
                       report.read_text()).group(1)
    assert json.loads(listed) == {"tft-tiny": {"cpu/onnx_fp32": sorted(
        (f"{RUN}/{name}" for name in (
            "accuracy.csv", "conversion_check.csv", "floor.csv", "native.csv", "offline.csv",
            "online.csv", "plots/offline_latency.png", "plots/offline_throughput.png",
            "plots/online_latency.png", "plots/online_tail.png")),
        key=lambda path: Path(path).name)}}


def test_html_report_of_a_partly_built_workflow_shows_what_was_built(built, tmp_path):
    """`snakemake --report` while a default target is not built yet (a configuration added
    to the targets): a report of what exists, where Snakemake alone refuses the DAG."""
    more = tmp_path / "more.yaml"
    more.write_text(yaml.safe_dump({"targets": [
        {"model": "tft-tiny", "gpu": "cpu", "backend": b, "precision": "fp32"}
        for b in ("onnx", "ts-script")]}))
    report = tmp_path / "partial.html"
    snakemake(built, "--configfile", str(TINY), str(more), "--report", str(report))
    listed = json.loads(re.search(r'<script id="categories">\s*var categories = (.*);\n',
                                  report.read_text()).group(1))
    assert set(listed["tft-tiny"]) == {"cpu/onnx_fp32", "all configurations",
                                       "cpu: what to ship"}, listed
    assert f"{RUN}/README.html" in listed["tft-tiny"]["cpu/onnx_fp32"]
    assert listed["tft-tiny"]["cpu: what to ship"] == ["results/tft-tiny/cpu/SHIP.html"]
    assert "results/tft-tiny/README.html" in listed["tft-tiny"]["all configurations"]
    assert not (built / "results/tft-tiny/cpu/ts-script_fp32").exists()  # nothing ran
