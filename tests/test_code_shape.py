"""The code's shape, as the developers' guide asks it: no file over 500 lines, no function
over 80 (a page of reading), in the package, the scripts and the tests alike."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    return sorted([*ROOT.glob("scripts/**/*.py"), *ROOT.glob("tests/*.py"),
                   *ROOT.glob("rules/*.smk"), ROOT / "Snakefile"])


def test_no_file_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not long, long


def test_no_function_is_over_80_lines():
    long = {}
    for path in _sources():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert not long, long
