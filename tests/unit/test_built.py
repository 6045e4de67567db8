"""The lines a run ends with: the reports asked for, built or not, and the HTML report's
command."""

from deploybench.records import built


def test_targets_name_their_reports_once_and_a_missing_one_points_to_its_logs(tmp_path):
    run = "results/tft/cpu/onnx_fp32"
    other = "results/tft/cpu/ts-trace_fp32"
    for path in ("results/tft/README.md", f"{run}/README.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("# report")
    targets = [f"{run}/README.html", f"{run}/compare.html", f"{other}/offline.csv",
               "results/tft/README.html", "results/tft/compare.html",
               "results/tft/source/perf_data.json", "results/tft/export/onnx/model.onnx"]
    assert built.reports(targets) == (
        ["results/tft/README.md"], [f"{run}/README.md", f"{other}/README.md"])
    text = built.summary(targets, tmp_path, ["--configfile", "my config.yaml"], failed=True)
    assert text.splitlines()[1:] == [
        "deploybench: 2 of 3 reports asked for are built (the run stopped at a failed job)",
        "  Model reports (every configuration compared):",
        "    results/tft/README.md",
        "  Configuration reports:",
        f"    {run}/README.md",
        f"    {other}/README.md   not built: see {other}/logs/",
        "  The HTML report of what is built (plots, tables, provenance): snakemake --report "
        "report.html --configfile 'my config.yaml'"]
