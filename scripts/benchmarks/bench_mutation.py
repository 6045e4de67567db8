"""Benchmark: mutation testing of the measurement core (issue 64). mutmut plants one small
change at a time in the modules below (an operator, a constant, a comparison, an argument)
and runs the tests that reach the changed function; a mutant is killed when a test fails.
Prints the score per module (killed / mutants the tests reach or should), writes every
survivor with its diff, and, where SURVIVORS names one, the reason it cannot matter.

    python scripts/benchmarks/bench_mutation.py --mutmut /tmp/mutlib      # the unit pass
    python scripts/benchmarks/bench_mutation.py --modules records/tail.py \
        --tests tests/unit/test_tail.py
    python scripts/benchmarks/bench_mutation.py --full                   # e2e tests too

Not in CI: it runs the selected tests once per mutant (the unit pass over these modules:
about an hour on 2 cores). mutmut (3.x, `pip install --target DIR mutmut`) need not be in
the project's environment: `--mutmut DIR` puts DIR on the path. The work is done in a copy
(`--work`, default a temporary folder): the package laid out as src/deploybench, as mutmut
expects, the tests and the data they read beside it. Targets (issue 64): >= 70 % for the
unit pass, >= 90 % for the whole suite.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The measurement core: perf_analyzer's output read, the tail, the rate scenario and its
# levels, host load, served/native, the regression report's noise, locks and GPU claims,
# repeats, the conversion check (the published tables' parser, scripts/results_tools/
# reference_tables.py, is no module of the package since issue 66)
MODULES = ["triton/perf_analyzer.py", "triton/perf_output.py", "triton/perf_command.py",
           "records/tail.py", "sweeps/open_loop.py",
           "sweeps/level.py", "measurement/host_load.py", "reporting/served_native.py",
           "reporting/compare.py", "reporting/compare_report.py", "measurement/locks.py",
           "measurement/device.py", "measurement/repeats.py", "steps/conversion_check.py",
           "steps/accuracy.py"]
TESTS = ["tests/unit/test_perf_analyzer_output.py", "tests/unit/test_perf_analyzer_runs.py",
         "tests/unit/test_tail.py", "tests/e2e/test_rate.py", "tests/unit/test_rate_verdict.py",
         "tests/unit/test_repeats.py",
         "tests/unit/test_rate_levels.py", "tests/unit/test_host_load.py",
         "tests/unit/test_headline.py", "tests/unit/test_served_native.py",
         "tests/unit/test_compare.py", "tests/unit/test_locks.py",
         "tests/e2e/test_locks_measurements.py", "tests/unit/test_device_claims.py",
         "tests/unit/test_checks_fed_wrong_models.py", "tests/e2e/test_isolation.py",
         "tests/unit/test_isolation_refusals.py"]
COPIED = ("scripts/", "tests/", "config/", "results/", "triton_backend/", "report/", "rules/",
          "docs/", "Snakefile", "pyproject.toml")
MEMORY_CAP = 4 * 2**30
HANG_S = 120
SURVIVORS = ROOT / "scripts" / "benchmarks" / "mutation_survivors.md"
# mutmut's exit codes of a mutant's test run, as its stats.status_by_exit_code names them
# (any other: suspicious); caught: killed, timed out or crashed
STATUS = {0: "survived", 1: "killed", 3: "killed", 5: "no tests", 33: "no tests",
          34: "skipped", 35: "suspicious", 36: "timeout", 37: "caught by type check",
          -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault",
          -9: "segfault"}
CAUGHT = ("killed", "timeout", "segfault", "caught by type check")


def prepare(work: Path, modules: list[str], tests: list[str], full: bool) -> None:
    """The copy mutmut works in, and its settings."""
    if work.exists():
        shutil.rmtree(work)
    # the checkout's files as git sees them (tracked, and new ones it does not ignore)
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if not source.is_file() or not name.startswith(COPIED):
            continue
        into = work / ("src/" + name.removeprefix("scripts/") if name.startswith(
            "scripts/deploybench/") else name)
        into.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, into)
    selected = [t for t in tests if (ROOT / t).is_file()]
    marks = "not gpu" if full else "not e2e and not gpu"
    lines = ["[mutmut]", "source_paths = src/deploybench",
             "only_mutate =", *(f"    src/deploybench/{m}" for m in modules),
             "also_copy =", *(f"    {c.rstrip('/')}" for c in COPIED if c != "scripts/"),
             "    scripts",
             "pytest_add_cli_args_test_selection =", *(f"    {t}" for t in selected),
             "pytest_add_cli_args =", "    -m", f"    {marks}", "    -p", "    no:cacheprovider",
             "    -q", "timeout_constant = 30.0"]
    (work / "setup.cfg").write_text("\n".join(lines) + "\n")


def rerun_survivors(work: Path, mutmut: Path | None, children: int,
                    patterns: list[str]) -> None:
    """The checkout's tests as they are now, over the survivors of an earlier run whose
    names match `patterns` (fnmatch): which of them a test added since kills."""
    for name in ("tests", "mutants/tests"):
        shutil.copytree(ROOT / "tests", work / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    names = [n for n, s in statuses(work).items() if s in ("survived", "no tests")
             and any(fnmatch.fnmatch(n, p) for p in patterns)]
    if names:
        run(work, mutmut, children, names)


def run(work: Path, mutmut: Path | None, children: int, names: list[str] = ()) -> None:
    env = dict(os.environ)
    # the copy's package first; mutmut where it was installed; no other checkout's scripts
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(mutmut or ""), str(work / "src")]))
    with open(work / "mutmut.log", "a") as log:  # its progress spinner: not for a terminal
        proc = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children",
                                 str(children), *names], cwd=work, env=env, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=_memory_cap)
        threading.Thread(target=_end_hung_mutants, args=(proc,), daemon=True).start()
        proc.wait()


def _end_hung_mutants(proc: subprocess.Popen) -> None:
    """Kill a mutant's test run past HANG_S (a loop that never ends, which mutmut's own
    timeout let run for minutes here): recorded as killed by a signal, a caught mutant."""
    import psutil

    while proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                if (child.cmdline()[:1] and child.cmdline()[0].startswith("mutmut: ")
                        and time.time() - child.create_time() > HANG_S):
                    child.kill()
            except psutil.Error:
                continue
        time.sleep(5)


def _memory_cap() -> None:
    """A mutant that loops appending (one of reference_tables' grew to 13 GiB in minutes)
    fails its allocation instead of filling the host: every process of the run gets
    MEMORY_CAP bytes of data."""
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))


def statuses(work: Path) -> dict[str, str]:
    """Each mutant -> its status, from mutmut's records beside the mutated files."""
    found = {}
    for meta in (work / "mutants").rglob("*.meta"):
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            found[name] = "not run" if code is None else STATUS.get(code, "suspicious")
    return found


def module_of(name: str) -> str:
    """deploybench.triton.perf_output.x_parse_csv__mutmut_3 -> triton/perf_output.py"""
    parts = name.split(".")
    cut = next(i for i, p in enumerate(parts) if p.startswith(("x_", "xǁ")))
    return "/".join(parts[1:cut]) + ".py"


def diff(work: Path, name: str, sources: dict) -> str:
    """A mutant's changed lines: its function in the mutated module against the original
    (mutmut keeps both, `<function>__mutmut_orig` and `<function>__mutmut_<n>`)."""
    module = work / "mutants" / "src" / "deploybench" / module_of(name)
    if module not in sources:
        text = module.read_text()
        lines = text.splitlines()
        sources[module] = {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno])
                           for node in ast.walk(ast.parse(text))  # methods too
                           if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    function = name.rsplit(".", 1)[1]
    original = sources[module].get(function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", "")
    mutated = sources[module].get(function, "")
    return "\n".join(line for line in difflib.unified_diff(
        original.splitlines()[1:], mutated.splitlines()[1:], lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---")))


# A mutant that changes only the words of a message (an error's, a log line's, a printed
# line's) changes no number a user reads: its survival cannot matter
MESSAGE = re.compile(r"raise |Error\(|print\(|log\.write\(|\.write\(|why = |f\"")


def automatic_reason(changed: str) -> str | None:
    """Why a mutant cannot matter, where its diff alone says so."""
    minus = [line[1:] for line in changed.splitlines() if line.startswith("-")]
    plus = [line[1:] for line in changed.splitlines() if line.startswith("+")]
    unquoted = [re.sub(r'"[^"]*"|\'[^\']*\'', '""', line) for line in minus + plus]
    same_code = len(minus) == len(plus) and all(
        a == b for a, b in zip(unquoted[:len(minus)], unquoted[len(minus):]))
    if same_code and any(MESSAGE.search(line) for line in minus):
        return "message words only (an error's or log line's text, no number)"
    return None


def reasons() -> dict[str, str]:
    """mutant (or an fnmatch pattern of them) -> why it survives, from SURVIVORS' lines
    `- `name`: reason`."""
    if not SURVIVORS.is_file():
        return {}
    return dict(re.findall(r"^- `([^`]+)`(?: \([^)]*\))?: (.+)$", SURVIVORS.read_text(), re.M))


def reason_of(name: str, known: dict[str, str]) -> str | None:
    """The reason SURVIVORS gives `name`: its own line, else the first pattern matching it."""
    return known.get(name) or next((why for pattern, why in known.items()
                                    if "*" in pattern and fnmatch.fnmatch(name, pattern)), None)


def report(found: dict[str, str], work: Path, out: Path) -> None:
    by_module: dict[str, Counter] = {}
    for name, status in found.items():
        by_module.setdefault(module_of(name), Counter())[status] += 1
    print(f"\n{'module':32} {'mutants':>7} {'caught':>6} {'survived':>8} {'no tests':>8} "
          f"{'other':>7} {'score':>6}")
    total = Counter()
    for module in sorted(by_module):
        counts = by_module[module]
        total += counts
        _line(module, counts)
    _line("all", total)
    known, sources = reasons(), {}
    lines = ["# Survivors of the last mutation run (bench_mutation.py)", ""]
    for name in sorted(n for n, s in found.items() if s in ("survived", "no tests")):
        changed = diff(work, name, sources)
        why = automatic_reason(changed) or reason_of(name, known) or "no reason given yet"
        lines += [f"- `{name}` ({found[name]}): {why}", "", "```diff", changed, "```", ""]
    out.write_text("\n".join(lines))
    print(f"\nsurvivors with their diffs: {out}")


def _line(module: str, counts: Counter) -> None:
    """A module's counts; its score: caught over caught, survived and untested mutants."""
    caught = sum(counts[s] for s in CAUGHT)
    judged = caught + counts["survived"] + counts["no tests"]
    score = f"{100 * caught / judged:.1f}%" if judged else "-"
    print(f"{module:32} {sum(counts.values()):7d} {caught:6d} {counts['survived']:8d} "
          f"{counts['no tests']:8d} {counts['suspicious'] + counts['not run']:7d} {score:>6}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutmut", type=Path, help="folder mutmut was installed into")
    parser.add_argument("--work", type=Path, help="the copy to mutate (default: temporary)")
    parser.add_argument("--modules", nargs="+", default=MODULES,
                        help="paths under scripts/deploybench/")
    parser.add_argument("--tests", nargs="+", default=TESTS)
    parser.add_argument("--full", action="store_true", help="e2e tests too (hours)")
    parser.add_argument("--children", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--report-only", action="store_true",
                        help="read the work folder of an earlier run")
    parser.add_argument("--rerun", nargs="+", metavar="PATTERN",
                        help="the earlier run's survivors matching these, with today's tests")
    parser.add_argument("--resume", action="store_true",
                        help="go on with an earlier run's work folder (mutants with a result kept)")
    parser.add_argument("--out", type=Path, default=Path("mutation_survivors_found.md"))
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="deploybench-mutation-"))
    if args.rerun:
        rerun_survivors(work, args.mutmut, args.children, args.rerun)
    elif not args.report_only:
        if not args.resume:
            prepare(work, args.modules, args.tests, args.full)
        run(work, args.mutmut, args.children)
    found = statuses(work)
    if not found:
        sys.exit(f"no mutants recorded under {work}/mutants")
    report(found, work, args.out)


if __name__ == "__main__":
    main()
