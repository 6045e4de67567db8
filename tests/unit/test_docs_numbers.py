"""Every number docs/ quotes from results/ is in the file it names: a paragraph, or a table
row with its caption, that names a results folder or file (in backticks) may quote only
figures found there (a table's or JSON's value at the precision quoted, or the text of its
NOTES and reports) or in the published tables (config/reference/tables.csv); settings
(batch sizes, concurrencies, request counts), dates, times and versions aside. A figure
the folders no longer hold, or one whose source is not named, fails."""

import json
import math
import re
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from testkit.workflow import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
RESULTS = ROOT / "results"
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE = re.compile(r"`([^`]+)`")
# a number as the docs write it: 6,039 / 0.80 / 9.67M / 1.5x, a range's ends apart
NUMBER = re.compile(r"(?<![\w.,/-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?([kM])?(?![\w/-]|\.\d)")
# what is not a figure: dates, times, versions, hashes, links and code, before numbers
NOT_FIGURES = re.compile(
    r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?|\b\d+\.\d+\.\d+\b|\b[0-9a-f]{7,40}\b"
    r"|\]\([^)]*\)|`[^`]*`|\bissue \d+|\b(?:torch|CUDA|Triton|perf_analyzer|r|driver|"
    r"onnxruntime-gpu|TensorRT|Python|python|opset|gcc)[ -]?\d+(?:\.\d+)*\b")
# a setting beside its number: batch sizes, concurrencies, windows, counts of things
SETTING_BEFORE = re.compile(
    r"(?:batch(?:es)?|concurrency|concurrencies|in flight|batch sizes?|levels?|windows?|"
    r"issue's|instances?|bucket|rows?|cores?|GPUs?|H100s?|H200s?)\s*$", re.I)
SETTING_AFTER = re.compile(
    r"^\s*(?:requests?\b(?!/s)|samples?|rows|levels?|windows?|GPUs?|H100s?|H200s?|cores?|"
    r"MiB|GiB|KB|MB|GB|kB|instances?|minutes|calls?|lines|points|files|target|"
    r"-s\b|-second|-window|-core|-GPU|bytes|tables?|steps?|frames|in flight|layers?)", re.I)
# a figure measured (a rate, served/native): a block quoting one must name its source
MEASURED = re.compile(r"\d[\d,.]*[kM]?\s*(?:inf/s|inferences/second|requests/s)|"
                      r"served/native (?:of |is |at )?\d|\binf/s\b|served/native \|")


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(sources text, figures text, what says it is measured) of a doc: each paragraph
    alone; each table row with the paragraph before the table and the table's header,
    whose sources it shares, and the header, which says what its cells are."""
    text = FENCE.sub("", text)
    found, caption = [], ""
    for part in re.split(r"\n\s*\n", text):
        lines = part.strip().splitlines()
        if not lines:
            continue
        if all(line.startswith("|") for line in lines):
            header = lines[0]
            found += [(caption + "\n" + header + "\n" + row, row, header + "\n" + row)
                      for row in lines[2:]]
        else:
            found.append((part, part, part))
            caption = part
    return found


def named_sources(text: str) -> list[Path]:
    """The results folders and files a block names in backticks (`results/...`, or a set
    `<model>/<gpu>/<set>/`, or a set name alone, found under results/), braces expanded."""
    paths = []
    for token in CODE.findall(text):
        token = token.split()[0].rstrip("/.,:;")
        if "<" in token or not re.search(r"results/|-20\d\d-\d\d-\d\d", token):
            continue
        heads = re.match(r"(.*)\{([^}]*)\}(.*)", token)
        names = ([heads[1] + choice + heads[3] for choice in heads[2].split(",")]
                 if heads else [token])
        for name in names:
            name = name.removeprefix("results/")
            candidates = [RESULTS / name, *RESULTS.glob(f"*/{name}"),
                          *RESULTS.glob(f"*/*/{name}")]
            paths += [p for p in candidates if p.exists()]
    return paths


@cache
def _values(path: Path) -> tuple[frozenset, tuple]:
    """A file's (or folder's) figures: the numbers its text shows, and its tables' and
    JSONs' numeric values."""
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.suffix in (".md", ".csv", ".json") and p.is_file()
        and "history" not in p.parts and "search" not in p.parts)
    shown, numeric = set(), []
    for file in files:
        text = file.read_text(errors="replace")
        written = [m[1].replace(",", "") + (m[2] or "") for m in NUMBER.finditer(text)]
        shown |= set(written)
        if file.suffix == ".md":  # a report's or NOTES' figure, quoted rounded
            numeric += [float(n) for n in written]
        elif file.suffix == ".csv":
            table = pd.read_csv(file, low_memory=False)
            numeric += [float(v) for c in table for v in table[c]
                        if isinstance(v, (int, float)) and not pd.isna(v)]
        elif file.suffix == ".json":
            numeric += _json_numbers(json.loads(text))
    return frozenset(shown), tuple(numeric)


def _json_numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _json_numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _json_numbers(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(
        value, bool) else []


@cache
def _published() -> tuple:
    table = pd.read_csv(ROOT / "config/reference/tables.csv", low_memory=False)
    return tuple(float(v) for c in table.columns[6:] for v in table[c]
                 if isinstance(v, (int, float)) and not pd.isna(v))


def _matches(figure: str, decimals: str, scale: str, shown: frozenset, numeric) -> bool:
    """A figure as quoted (`6,039`, `0.80`, `9.67M`) found among the source's: shown as
    text, or a value that rounds to it at the precision quoted."""
    plain = figure.replace(",", "")
    if scale == "" and plain + decimals in shown:
        return True
    value = float(plain + decimals) * {"": 1, "k": 1e3, "M": 1e6}[scale]
    digits = len(decimals) - 1 if decimals else 0
    step = 10 ** -digits * {"": 1, "k": 1e3, "M": 1e6}[scale]
    return any(math.isclose(round(v / step), value / step, abs_tol=1e-6) for v in numeric)


def figures(text: str):
    """The figures of a block (settings, dates, versions and code aside), with where."""
    cleaned = NOT_FIGURES.sub(lambda m: " " * len(m[0]), text)
    for m in NUMBER.finditer(cleaned):
        integer, decimals, scale = m[1], m[2] or "", m[3] or ""
        if not decimals and not scale and int(integer.replace(",", "")) < 100:
            continue  # counts, small settings
        if SETTING_BEFORE.search(cleaned[max(0, m.start() - 24):m.start()]) or \
                SETTING_AFTER.match(cleaned[m.end():m.end() + 24]):
            continue
        yield integer, decimals, scale


def unsourced(doc: Path) -> list[str]:
    """What a doc quotes from results/ that its named sources do not hold."""
    missing = []
    for sources_text, text, said in blocks(doc.read_text()):
        sources = named_sources(sources_text)
        if not sources:
            if MEASURED.search(NOT_FIGURES.sub(" ", said)) and any(figures(text)):
                missing.append(f"no results file named for: {text[:160]!r}")
            continue
        values = [_values(s) for s in sources]
        shown = frozenset().union(*(v[0] for v in values))
        numeric = [n for v in values for n in v[1]] + list(_published())
        for integer, decimals, scale in figures(text):
            if not _matches(integer, decimals, scale, shown, numeric):
                missing.append(f"{integer}{decimals}{scale} in: {text[:160]!r} (sources: "
                               f"{', '.join(str(s.relative_to(ROOT)) for s in sources)})")
    return missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_figure_the_docs_quote_from_results_is_in_the_file_they_name(doc):
    assert unsourced(doc) == []
