"""The `deploybench` command (deploybench.cli), as a user runs it: the console script the
set-up installs, each subcommand printing the command it runs and running it, a key's parts
refused early naming what is valid, a real Snakemake build through it."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from testkit.cli import deploybench

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_script_lists_every_subcommand():
    result = deploybench("--help")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines()
              if line.strip()}
    assert listed == {"run", "plan", "report", "archive", "assemble", "pack-offline",
                      "offline-run", "lanes", "bench", "ship", "add-model"}


def test_plan_prints_the_snakemake_command_and_plans_that_configuration():
    result = deploybench("plan", "-m", "tft", "-g", "cpu", "-b", "onnx", "-p", "fp32")
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stderr.splitlines()[0]
    assert printed.startswith("+ ") and printed.endswith(
        "snakemake results/tft/cpu/onnx_fp32/README.md -n")
    # Snakemake's own plan of that report: the configuration's measuring jobs among its jobs
    plan = result.stdout
    for rule in ("offline", "online", "native", "configuration_report"):
        assert f"\n{rule} " in plan, rule


@pytest.mark.parametrize("args, words", [
    (("-m", "tft", "-g", "nosuch", "-b", "onnx", "-p", "fp32"),
     ["unknown GPU key 'nosuch'", "cpu", "h100"]),
    (("-m", "tft", "-g", "cpu", "-b", "onnx", "-p", "fp16"),
     ["precision 'fp16' cannot run on GPU key 'cpu'"]),
    (("-m", "nosuch", "-g", "cpu", "-b", "onnx", "-p", "fp32"), ["unknown model 'nosuch'", "tft"]),
    (("-m", "tft",), ["needs all four", "--gpu, --backend, --precision"]),
])
def test_a_wrong_key_is_refused_before_snakemake_runs_naming_what_is_valid(args, words):
    result = deploybench("run", *args)
    assert result.returncode == 2
    assert "+ " not in result.stderr  # nothing was run
    for word in words:
        assert word in result.stderr


def test_an_unknown_benchmark_is_refused_with_the_list():
    result = deploybench("bench", "nosuch")
    assert result.returncode == 2
    scripts = sorted(p.name[len("bench_"):-len(".py")]
                     for p in (ROOT / "scripts" / "benchmarks").glob("bench_*.py"))
    assert len(scripts) >= 5 and "incremental" in scripts
    assert f"valid: {', '.join(scripts)}\n" in result.stderr  # every script, in order
    assert f"benchmarks: {', '.join(scripts)}" in deploybench("bench").stdout


@pytest.mark.parametrize("tool, script, says", [
    ("archive", "results_tools/results_archive.py", "{pack,unpack}"),  # its argparse
    ("lanes", "machines/gpu_lanes.sh", "SECONDS LANES_FILE [NAME...]"),  # its header
])
def test_a_tools_own_help_is_passed_through(tool, script, says):
    result = deploybench(tool, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("+ ")
    assert f"scripts/{script} --help" in result.stderr
    assert says in result.stdout  # the tool answered, not click


def test_the_html_report_needs_nothing_beyond_the_main_jobs_environment():
    """`snakemake --report` imports pygments: it is a dependency of the package itself, not
    only of the test extra (where pytest brought it in before)."""
    core = [r.split(";")[0] for r in importlib.metadata.requires("deploybench")
            if "extra ==" not in r]
    names = {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip() for r in core}
    assert {"pygments", "click", "snakemake"} <= names
