"""Parse the published result tables of the reference documents ("Deploying X on Triton").

Each result section of a document ("Offline: NVIDIA A30, NVIDIA TensorRT with FP16,
Dataset: electricity") gives the parameters of one run and a results table, one row per
batch size (offline) or concurrency (online). The documents come in two layouts:

* markdown (000, 001, 003, 004): ``#### Offline: ...`` headings, a ``| Parameter Name |
  Parameter Value |`` table (001: ``* **GPU:** ...`` bullets plus one parameter table per
  scenario that holds for all its sections) and a markdown results table;
* linearised (002): the same cells, one per line: the heading, "Our results were obtained
  ...", "Parameter Name", "Parameter Value", name/value pairs, "Results Table", the header
  cells, then the values row by row.

Table-of-contents entries and text between sections (plot captions, images) are skipped.
Headers are mapped to one set of columns: ``batch``, ``concurrency`` and the metrics as the
documents' usual results-table headers (``Inferences/Second``, ``Client Send (ms)``, ...,
``avg latency (ms)``). Where a document's time headers carry no unit (001, 003), the unit is
taken from Little's law (avg latency = batch x concurrency / throughput): 001 is in
milliseconds, 003 in microseconds, converted here to milliseconds. Parameters become
snake_case columns; a table column that repeats a parameter (001's Precision) must agree
with it, and a per-row column that is not a metric (001's Sequence Length) is kept as
``sequence_length``.

    python scripts/results_tools/reference_tables.py ../shared/seeds config/reference/tables.csv
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from deploybench.records.tables import LATENCY_COLUMNS, THROUGHPUT

INTRO = "Our results were obtained using the following configuration:"
GPU_KEYS = {"A30": "a30", "A40": "a40", "A100": "a100", "V100": "v100", "T4": "t4",
            "H100": "h100"}
METRICS = [THROUGHPUT, *LATENCY_COLUMNS]
LEAD = ["document", "model", "scenario", "section", "gpu", "gpu_key"]
KEYS = ["batch", "concurrency"]
# results-table header (lower case, unit dropped) -> column
HEADERS = {m.lower().removesuffix(" (ms)"): m for m in METRICS} | {
    "batch": "batch", "client batch size": "batch",
    "concurrency": "concurrency", "concurrent client requests": "concurrency",
    "sequence length": "sequence_length",
}
ROW_PARAMETERS = {"sequence_length"}  # per-row columns that are neither keys nor metrics

_HEADING = re.compile(r"^(?P<hashes>#{1,6}\s+)?(?P<title>(?P<scenario>Offline|Online):\s+.+?)\s*$")
_NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_TOC = re.compile(r"^\s*[-*]\s+\[(Offline|Online):")
_BULLET = re.compile(r"^\s*[-*]\s+\*\*(?P<name>[^*]+?):\*\*\s*(?P<value>.*?)\s*$")
_SEPARATOR = re.compile(r"^:?-+:?$")


@dataclass
class Section:
    """One result section as written in the document, before normalisation."""

    title: str
    params: dict[str, str] = field(default_factory=dict)
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    @property
    def scenario(self) -> str:
        return self.title.split(":", 1)[0].lower()


def _snake(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_")


def _value(text: str) -> int | float | str:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if _NUMBER.match(text):
        return float(text)
    return text


def gpu_key(gpu: str) -> str:
    """a30/a40/a100/v100/t4/h100 of a GPU text such as 'NVIDIA DGX A100 (1x A100 80GB)'."""
    found = {key for name, key in GPU_KEYS.items() if re.search(rf"\b{name}\b", gpu)}
    if len(found) != 1:
        raise ValueError(f"GPU '{gpu}' names {len(found)} known GPUs, not one")
    return found.pop()


# --- the linearised layout -----------------------------------------------------------------

def _linear_sections(lines: list[str]) -> tuple[list[Section], int]:
    """Sections of a document with one table cell per line, and its number of ToC entries."""
    sections, toc = [], 0
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if not heading or heading["hashes"]:
            continue
        following = next((x for x in lines[i + 1:] if x), "")
        if following != INTRO:
            toc += 1  # a table-of-contents entry: the same title, with no table after it
            continue
        section = Section(heading["title"])
        j = lines.index(INTRO, i + 1) + 1
        if lines[j:j + 2] == ["Parameter Name", "Parameter Value"]:
            j += 2
        while j < len(lines) and lines[j] != "Results Table":
            if j + 1 >= len(lines) or _HEADING.match(lines[j]) or lines[j] == INTRO:
                raise ValueError(f"section '{section.title}': no 'Results Table' after "
                                 f"its parameters")
            section.params[lines[j]] = lines[j + 1]
            j += 2
        j += 1
        while j < len(lines) and lines[j] and not _NUMBER.match(lines[j]):
            section.headers.append(lines[j])
            j += 1
        values = []
        while j < len(lines) and _NUMBER.match(lines[j]):
            values.append(lines[j])
            j += 1
        width = len(section.headers)
        if not width or not values or len(values) % width:
            raise ValueError(f"section '{section.title}': {len(values)} values do not fill "
                             f"rows of {width} headers")
        section.rows = [values[k:k + width] for k in range(0, len(values), width)]
        sections.append(section)
    return sections, toc


# --- the markdown layout -------------------------------------------------------------------

def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [cell.strip() for cell in inner.split("|")]


def _tables(lines: list[str]) -> list[tuple[int, list[list[str]]]]:
    """(first line, rows of cells without the separator row) of each markdown table."""
    tables, i = [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|"):
            start = i
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                i += 1
            rows = [_cells(x) for x in lines[start:i]]
            rows = [r for r in rows if not all(_SEPARATOR.match(c) for c in r if c)]
            tables.append((start, rows))
        else:
            i += 1
    return tables


def _is_results(header: list[str]) -> bool:
    return any(c.lower().removesuffix(" (ms)") == "inferences/second" for c in header)


def _markdown_sections(lines: list[str]) -> tuple[list[Section], int]:
    """Sections of a markdown document, and its number of table-of-contents entries."""
    toc = sum(1 for x in lines if _TOC.match(x))
    fenced, headings = False, []
    for i, line in enumerate(lines):
        fenced ^= line.lstrip().startswith("```")
        if not fenced and line.startswith("#"):
            headings.append(i)  # a '#' inside a code block is a shell comment
    headings.append(len(lines))
    tables = _tables(lines)
    sections, common = [], {}
    for start, end in zip(headings, headings[1:]):
        heading = _HEADING.match(lines[start])
        own = [rows for first, rows in tables if start < first < end]
        params = {r[0]: r[1] for rows in own if rows[0][:2] == ["Parameter Name",
                                                                 "Parameter Value"]
                  for r in rows[1:]}
        if not heading:
            if re.match(r"^#+\s+(Offline|Online) scenario", lines[start]):
                common = params  # parameters shared by every section of the scenario
            elif lines[start].startswith("## "):
                common = {}
            continue
        section = Section(heading["title"], dict(common))
        for line in lines[start + 1:end]:
            bullet = _BULLET.match(line)
            if bullet:
                params[bullet["name"]] = bullet["value"]
        # a section's own value wins over the scenario's (001: Model format)
        section.params |= params
        results = [rows for rows in own if _is_results(rows[0])]
        if len(results) != 1:
            raise ValueError(f"section '{section.title}': {len(results)} results tables")
        section.headers, *section.rows = results[0]
        for row in section.rows:
            if len(row) != len(section.headers):
                raise ValueError(f"section '{section.title}': a row of {len(row)} cells "
                                 f"under {len(section.headers)} headers: {'|'.join(row)}")
        if not section.rows:
            raise ValueError(f"section '{section.title}': results table has no rows")
        sections.append(section)
    return sections, toc


# --- normalisation -------------------------------------------------------------------------

def _time_scale(section: Section, table: dict[str, list]) -> int:
    """Divisor to milliseconds of a table's time columns, checked by Little's law."""
    ips, avg = table["Inferences/Second"], table.get("avg latency (ms)")
    if avg is None:
        raise ValueError(f"section '{section.title}': no average latency column")
    batch = table.get("batch", [1] * len(ips))
    concurrency = table.get("concurrency", [1] * len(ips))
    ratio = statistics.median(a / (1000.0 * b * c / i)
                              for a, b, c, i in zip(avg, batch, concurrency, ips))
    explicit = all(h.endswith("(ms)") for h in section.headers
                   if HEADERS.get(h.lower().removesuffix(" (ms)"), "").endswith("(ms)"))
    if 0.5 < ratio < 2:
        return 1
    if 500 < ratio < 2000 and not explicit:
        return 1000
    raise ValueError(f"section '{section.title}': latency is {ratio:.3g} x batch x "
                     f"concurrency / throughput; unit not ms or us")


def _records(section: Section) -> list[dict]:
    """One record per results row, parameters first, then keys and metrics."""
    params = {_snake(k): _value(v) for k, v in section.params.items()}
    if "gpu" not in params:
        raise ValueError(f"section '{section.title}': no GPU parameter")
    columns: dict[str, list] = {}
    for k, header in enumerate(section.headers):
        cells = [row[k] for row in section.rows]
        key = header.lower().removesuffix(" (ms)").strip()
        if key == "" and cells == [str(n) for n in range(len(cells))]:
            continue  # pandas' index written into the table (003)
        if key == "precision":
            if set(cells) != {params.get("precision")}:
                raise ValueError(f"section '{section.title}': table precision {set(cells)} "
                                 f"is not the parameter's {params.get('precision')}")
            continue
        if key not in HEADERS:
            raise ValueError(f"section '{section.title}': unknown results header '{header}'")
        column = HEADERS[key]
        if column in columns:
            raise ValueError(f"section '{section.title}': two columns for '{column}'")
        try:
            numbers = [float(c) for c in cells]
        except ValueError as error:
            raise ValueError(f"section '{section.title}': column '{header}': {error}") from None
        if column in KEYS or column in ROW_PARAMETERS:
            if any(n != int(n) for n in numbers):
                raise ValueError(f"section '{section.title}': '{header}' not whole numbers")
            numbers = [int(n) for n in numbers]
        columns[column] = numbers
    if "Inferences/Second" not in columns:
        raise ValueError(f"section '{section.title}': no Inferences/Second column")
    scale = _time_scale(section, columns)
    for column in METRICS[1:]:
        if column in columns and scale != 1:
            columns[column] = [round(v / scale, 9) for v in columns[column]]
    gpu = str(params.pop("gpu"))
    lead = {"scenario": section.scenario, "section": section.title, "gpu": gpu,
            "gpu_key": gpu_key(gpu)}
    order = [c for c in ROW_PARAMETERS if c in columns] + KEYS + METRICS
    return [lead | params | {c: columns[c][n] if c in columns else None for c in order}
            for n in range(len(section.rows))]


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Whole-number columns as nullable integers, other numeric columns as floats."""
    out = frame.copy()
    for column in out.columns:
        values = [v for v in out[column].tolist() if v is not None and not pd.isna(v)]
        if column in KEYS or column in ROW_PARAMETERS or (
                values and all(isinstance(v, int) and not isinstance(v, bool)
                               for v in values)):
            out[column] = pd.array([None if v is None or pd.isna(v) else int(v)
                                    for v in out[column]], dtype="Int64")
        elif column in METRICS or (values and all(isinstance(v, (int, float))
                                                  for v in values)):
            out[column] = pd.to_numeric(out[column]).astype("float64")
        else:
            out[column] = out[column].astype(object).where(out[column].notna(), None)
    return out


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    tail = [c for c in ROW_PARAMETERS if c in frame] + KEYS + METRICS
    middle = [c for c in frame.columns if c not in LEAD and c not in tail]
    return frame[LEAD + middle + [c for c in tail if c in frame]]


def read_index(documents_dir: str | Path) -> dict[str, str]:
    """file name -> model, from the documents folder's INDEX.md table."""
    models = {}
    for line in (Path(documents_dir) / "INDEX.md").read_text().splitlines():
        cells = _cells(line) if line.startswith("|") else []
        if len(cells) >= 2 and cells[0].endswith(".txt"):
            models[cells[0]] = cells[1]
    return models


def _title_model(lines: list[str]) -> str:
    first = next((x for x in lines if x), "")
    found = re.match(r"^#*\s*Deploying\s+(?:the\s+)?(.+?)(?:\s+model)?\s+(?:on|with)\s", first)
    return found.group(1) if found else first.lstrip("# ")


def parse_document(path: str | Path, model: str | None = None) -> pd.DataFrame:
    """One row per results-table row of a reference document (see the module docstring).

    model: defaults to the document's entry in INDEX.md beside it, else its title."""
    path = Path(path)
    lines = [line.rstrip() for line in path.read_text(encoding="utf-8").splitlines()]
    if model is None:
        index = path.parent / "INDEX.md"
        model = read_index(path.parent).get(path.name) if index.is_file() else None
        model = model or _title_model(lines)
    markdown = any(line.lstrip().startswith("| Parameter Name") for line in lines)
    sections, toc = (_markdown_sections(lines) if markdown
                     else _linear_sections([line.strip() for line in lines]))
    if not sections:
        raise ValueError(f"{path.name}: no result sections")
    if toc and toc != len(sections):
        raise ValueError(f"{path.name}: {toc} sections in the table of contents, "
                         f"{len(sections)} with results")
    records = [{"document": path.name, "model": model} | r
               for section in sections for r in _records(section)]
    return _ordered(_typed(pd.DataFrame(records)))


def parse_documents(documents_dir: str | Path) -> pd.DataFrame:
    """Every document listed in the folder's INDEX.md, in the index's order."""
    documents_dir = Path(documents_dir)
    frames = [parse_document(documents_dir / name, model)
              for name, model in read_index(documents_dir).items()]
    if not frames:
        raise ValueError(f"{documents_dir / 'INDEX.md'} lists no documents")
    records = pd.concat([f.astype(object) for f in frames], ignore_index=True)
    records = records.astype(object).where(records.notna(), None)
    return _ordered(_typed(records))


def to_csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: python scripts/results_tools/reference_tables.py DOCUMENTS_DIR OUT_CSV")
    out = Path(argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(to_csv_text(parse_documents(argv[0])))


if __name__ == "__main__":
    main(sys.argv[1:])
