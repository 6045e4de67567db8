"""The code's shape, as the developers' guide asks it: no file over 500 lines (and no more
than 4 over 400), at most 12 modules at the package root, no class over
150, no function over 80 (a page of reading), in the package, the scripts and the tests
alike; no function of the reports over 40; the import contract broken by an import that
points the wrong way; and every test module in the folder of its kind (tests/unit, e2e, gpu),
which alone marks it (tests/conftest.py), as a planted module out of place shows."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 150  # a class that holds more does more than one job
REPORTING = ROOT / "scripts/deploybench/reporting"
MAX_REPORT_FUNCTION_LINES = 40  # a page's skeleton is a template of its module


def _sources() -> list[Path]:
    return sorted([*ROOT.glob("scripts/**/*.py"), *ROOT.glob("tests/**/*.py"),
                   *ROOT.glob("rules/*.smk"), ROOT / "Snakefile"])


def test_no_file_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not long, long


# Room under the cap: a file near it is the next to split (issue 66: 16 of them sat at 400-496)
ROOMY_LINES, MAX_NEAR_THE_CAP = 400, 4
MAX_ROOT_MODULES = 12  # the package root shows its parts; the rest lives in their packages


def test_few_files_are_near_the_cap_and_the_package_root_shows_its_parts():
    sources = [*_sources(), *ROOT.glob("triton_backend/**/*.cc"),
               *ROOT.glob("triton_backend/**/*.h")]
    near = {str(p.relative_to(ROOT)): n for p in sources
            if (n := len(p.read_text().splitlines())) > ROOMY_LINES}
    assert len(near) <= MAX_NEAR_THE_CAP, near
    root = sorted(p.name for p in (ROOT / "scripts/deploybench").glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def _long_functions(paths: list[Path], limit: int) -> dict[str, int]:
    long = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    return long


def test_no_function_is_over_80_lines():
    long = _long_functions([p for p in _sources() if p.suffix == ".py"], MAX_FUNCTION_LINES)
    assert not long, long


def _long_classes(paths: list[Path], limit: int, root: Path = ROOT) -> dict[str, int]:
    return {f"{path.relative_to(root)}:{node.lineno} {node.name}": lines
            for path in paths for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ClassDef)
            and (lines := node.end_lineno - node.lineno + 1) > limit}


def test_no_class_is_over_150_lines():
    long = _long_classes([p for p in _sources() if p.suffix == ".py"], MAX_CLASS_LINES)
    assert not long, long


def test_a_class_over_150_lines_fails(tmp_path):
    """The cap holds a class of 151 lines to it and lets one of 150 pass."""
    for lines, caught in ((150, False), (151, True)):
        path = tmp_path / f"c{lines}.py"
        path.write_text("class C:\n" + "    x = 1\n" * (lines - 1))
        assert bool(_long_classes([path], MAX_CLASS_LINES, tmp_path)) is caught, lines


def test_no_report_function_is_over_40_lines():
    """The reports (deploybench.reporting): each page's skeleton a template string of its
    module, its sections and rows functions of their own."""
    paths = sorted(REPORTING.glob("**/*.py"))
    assert len(paths) > 5, paths
    long = _long_functions(paths, MAX_REPORT_FUNCTION_LINES)
    assert not long, long


@pytest.mark.parametrize("module, planted", [
    ("records/tail.py", "from deploybench.measurement import telemetry"),  # up, a layer
    ("records/tables.py", "from deploybench.records import layout"),  # sideways, a layer
    ("measurement/nvml.py", "from deploybench.measurement import telemetry"),  # up, inside
    ("served/__init__.py", "from deploybench.records import tables"),  # served code, the pipeline's
    ("steps/performance.py", "from deploybench.steps import search"),  # a step importing a step
    ("reporting/markdown.py", "from deploybench.steps import report"),  # a report, a step
    ("reporting/plots.py", "from deploybench.triton import perf_analyzer"),  # below, forbidden
    ("reporting/headline.py", "from deploybench.measurement import telemetry"),  # machinery
])
def test_the_import_contract_fails_on_a_planted_import(tmp_path, module, planted):
    """CI's import contract (pyproject.toml, lint-imports) is broken by one planted import
    that goes up, sideways within a layer, from served code into the pipeline, from one
    step module into another, or from a report into a step, Triton or the measurement's
    machinery (a report reads recorded facts: records.facts)."""
    package = tmp_path / "deploybench"
    shutil.copytree(ROOT / "scripts/deploybench", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = package / module
    target.write_text(f"{planted}  # planted\n{target.read_text()}")
    linted = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-logo", "--no-cache",
         "--config", str(ROOT / "pyproject.toml")], capture_output=True, text=True,
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert linted.returncode != 0 and "BROKEN" in linted.stdout, linted.stdout[-2000:]
    assert planted.split()[-1] in linted.stdout


KINDS = ("unit", "e2e", "gpu")  # tests/conftest.py marks e2e/ `e2e` and gpu/ `gpu`


def _out_of_place(tests: Path) -> dict[str, str]:
    """Each test module outside tests/unit, e2e and gpu, and each mark of its own kind
    (`@pytest.mark.e2e`, `pytestmark = pytest.mark.gpu`, `marks=pytest.mark.gpu`): the
    folder is the one place that says a test's kind."""
    found = {}
    for path in sorted(tests.rglob("test_*.py")):
        where = path.relative_to(tests)
        if where.parts[0] not in KINDS:
            found[str(where)] = "outside unit/, e2e/ and gpu/"
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in ("e2e", "gpu")
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "mark"):
                found[f"{where}:{node.lineno}"] = f"marks itself {node.attr}"
    return found


def test_every_test_module_is_in_the_folder_of_its_kind_and_marks_none():
    modules = {kind: len(list((ROOT / "tests" / kind).glob("test_*.py"))) for kind in KINDS}
    assert all(modules.values()) and sum(modules.values()) > 50, modules
    found = _out_of_place(ROOT / "tests")
    assert not found, found


@pytest.mark.parametrize("module, planted", [
    ("test_stray.py", ""),  # a test module beside the folders
    ("integration/test_misplaced.py", ""),  # in a folder of no kind
    ("e2e/test_cluster_rules.py", "pytestmark = pytest.mark.e2e"),  # a module marks itself
    ("unit/test_cluster.py", "import pytest\n\n\n@pytest.mark.gpu\ndef test_x():\n    pass"),
])
def test_a_test_module_out_of_place_or_marking_its_kind_is_caught(tmp_path, module, planted):
    """The check above fails on a copy of tests/ with one module planted beside the folders
    or one module marking its own kind."""
    tests = tmp_path / "tests"
    shutil.copytree(ROOT / "tests", tests, ignore=shutil.ignore_patterns(
        "__pycache__", "data", "gpu-results", "config"))
    assert not _out_of_place(tests)
    target = tests / module
    target.parent.mkdir(exist_ok=True)
    target.write_text(f"{target.read_text() if target.exists() else ''}\n{planted}\n")
    found = _out_of_place(tests)
    assert list(found) and all(k.startswith(str(target.relative_to(tests))) for k in found), found
