"""The results tree: every path pattern the rules and the steps use, in one place.

    results/<model>/source/            weights.pt, data/ (generated), eval.npz, perf_data.json,
        inputs/ (the user's checkpoint and dataset: <name>.sha256, their content's stamp)
    results/<model>/export/<format>/   one exported FP32 model (model.onnx, model.pt, ...)
    results/<model>/export/<format>-<precision>/   the same export in another precision
        (onnx-fp16/: a model's export.precision); FP32 keeps the folder it always had
    results/<model>/export/sparse/     a recommender's embedding storage (ensembles)
    results/<model>/<gpu>/<backend>_<precision>/   one configuration: converted/,
        conversion_check.csv, model_repository/, accuracy.csv, offline.csv, online.csv,
        native.csv, plots/, README.md (+ README.html), compare.md, logs/, benchmarks/,
        history/ (<stem>-<UTC stamp>.<ext>: a copy of every finished measurement)
    results/<model>/<gpu>/<backend>_<precision>/search/   the configuration search: README.md,
        search.json, frontier.png, winner/config.pbtxt; <point>/ per point (model_repository/,
        point.json, offline.csv, online.csv (+ .json) when it was measured, logs/, benchmarks/)
    results/<model>/<gpu>/<name>-<date>/   a dated measurement set: NOTES.md, configurations
    results/<model>/README.md          the model report (+ plots/: its frontiers; README.html)
    results/<model>/compare.md         the model's regression report
    results/packages/<sha>.txt         an installed package list, named by its hash

Patterns carry Snakemake's wildcards (`{model}`, `{gpu}`, ...); `fill` gives one path.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..backends import EXPORT_PRECISION, FLOAT_PRECISIONS

MODEL = "results/{model}"
SOURCE = f"{MODEL}/source"
INPUT_STAMPS = "inputs"  # in SOURCE: a stamp of the user's checkpoint's, dataset's content
EXPORT = f"{MODEL}/export"
CONFIGURATION = f"{MODEL}/{{gpu}}/{{backend}}_{{precision}}"
MODEL_REPORT = f"{MODEL}/README.md"
# Its headline alone, Markdown and reStructuredText alike: the HTML report's front page
# (report/workflow.rst) includes it
MODEL_HEADLINE = f"{MODEL}/headline.md"
CONFIGURATION_REPORT = "README.md"  # inside a configuration folder
# Regression reports: a configuration's measurements against a baseline, and the model's
COMPARISON = "compare.md"  # inside a configuration folder
MODEL_COMPARISON = f"{MODEL}/compare.md"
# A finished measurement's copy: history/<stem>-<stamp><suffix> beside it, stamped in UTC
HISTORY = "history"
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
STAMP = re.compile(r"\d{8}T\d{6}Z")
# A markdown report as one HTML page, its plots embedded (Snakemake's HTML report)
CONFIGURATION_PAGE = "README.html"
MODEL_PAGE = f"{MODEL}/README.html"
COMPARISON_PAGE = "compare.html"
MODEL_COMPARISON_PAGE = f"{MODEL}/compare.html"
# What to ship for a model on a GPU key (reporting.ship), and its HTML report page
SHIP = f"{MODEL}/{{gpu}}/SHIP.md"
SHIP_PAGE = f"{MODEL}/{{gpu}}/SHIP.html"
# The configuration search (deploybench.search): its report and each point's folder
SEARCH = f"{CONFIGURATION}/search"
SEARCH_POINT = f"{SEARCH}/{{point}}"
# A dated measurement set's description (results/<model>/<gpu>/<name>-<date>/NOTES.md)
SET_NOTES = "NOTES.md"
# The passes of a side-by-side run (scripts/machines/two_gpus.sh), folders of a dated set:
# `together/` measured while another configuration ran on the host's other GPU, `alone/`
# and `again/` the same steps with nothing beside them
BESIDE_A_NEIGHBOUR = "together"
SET_PASSES = (BESIDE_A_NEIGHBOUR, "alone", "again")
# The installed packages a measurement ran with, by the hash its provenance records
PACKAGES = "results/packages/{sha}.txt"

# Outputs that are folders (Snakemake's directory()): a SavedModel, an ensemble's
# converted parts, the generated data, the sparse storage, a Triton model repository.
DIRECTORIES = ("data", "sparse", "model_repository")
DIRECTORY_SUFFIXES = (".savedmodel", ".ensemble")


def source(name: str) -> str:
    return f"{SOURCE}/{name}"


def export_folder(fmt: str, precision: str = EXPORT_PRECISION) -> str:
    """The folder name of a format's export in a precision: `<format>` in FP32,
    `<format>-<precision>` otherwise."""
    return fmt if precision == EXPORT_PRECISION else f"{fmt}-{precision}"


def export_of(folder: str) -> tuple[str, str]:
    """(format, precision) of an export folder's name (export_folder's inverse)."""
    for precision in FLOAT_PRECISIONS:
        if precision != EXPORT_PRECISION and folder.endswith(f"-{precision}"):
            return folder.removesuffix(f"-{precision}"), precision
    return folder, EXPORT_PRECISION


def export_folders(formats: tuple[str, ...]) -> str:
    """A regular expression of the export folders of `formats` in every precision (the
    rules' wildcard constraint)."""
    others = "|".join(p for p in FLOAT_PRECISIONS if p != EXPORT_PRECISION)
    return f"({'|'.join(map(re.escape, formats))})(-({others}))?"


def export(fmt: str, name: str, precision: str = EXPORT_PRECISION) -> str:
    """An export's file (or its logs/benchmarks: `name` under the export's folder)."""
    return f"{EXPORT}/{export_folder(fmt, precision)}/{name}"


def sparse() -> str:
    return f"{EXPORT}/sparse"


def configuration(name: str = "") -> str:
    return f"{CONFIGURATION}/{name}" if name else CONFIGURATION


def search(name: str) -> str:
    """A file of a configuration's search (README.md, search.json, winner/config.pbtxt)."""
    return f"{SEARCH}/{name}"


def search_point(name: str) -> str:
    """A file of one search point (point.json, config.pbtxt, model_repository, logs/...)."""
    return f"{SEARCH_POINT}/{name}"


def fill(pattern: str, **values) -> str:
    return pattern.format(**values)


def as_regex(pattern: str, **fixed: str) -> re.Pattern:
    """A pattern as a regular expression matching the end of a path: the wildcards given
    in `fixed` as those values, the others as one path component each."""
    parts = re.split(r"(\{\w+\})", pattern)
    regex = "".join(
        (re.escape(fixed[p[1:-1]]) if p[1:-1] in fixed else r"[^/]+")
        if re.fullmatch(r"\{\w+\}", p) else re.escape(p)
        for p in parts)
    return re.compile(regex + "$")


def is_directory(path: str | Path) -> bool:
    path = Path(path)
    return path.name in DIRECTORIES or path.suffix in DIRECTORY_SUFFIXES


def configuration_reports(model_report: Path) -> list[Path]:
    """The configuration reports built so far beside a model report."""
    return sorted(Path(model_report).parent.glob(f"*/*/{CONFIGURATION_REPORT}"))


def dated_sets(model_report: Path) -> list[Path]:
    """The dated measurement sets beside a model report: `<gpu>/<name>-<date>/` folders
    (partial sweeps, repeats, probes kept apart from the configuration folders), each
    described by its NOTES.md, holding configuration folders of their own."""
    return sorted(p.parent for p in Path(model_report).parent.glob(f"*/*/{SET_NOTES}"))


def searches(model_report: Path) -> list[Path]:
    """The configuration searches beside a model report (their search.json): those built
    in configuration folders, `<gpu>/<configuration>/search/`, and those kept in dated
    sets, `<gpu>/<set>/<configuration>/search/`."""
    folder = Path(model_report).parent
    kept = [p for p in folder.glob("*/*/*/search/search.json")
            if (p.parents[2] / SET_NOTES).is_file()]
    return sorted([*folder.glob("*/*/search/search.json"), *kept])


def history_copy(path: str | Path, stamp: str) -> Path:
    """The copy of measurement `path` (e.g. offline.json) stamped `stamp`."""
    path = Path(path)
    return path.parent / HISTORY / f"{path.stem}-{stamp}{path.suffix}"


def history_copies(path: str | Path) -> dict[str, Path]:
    """stamp -> copy of measurement `path`, oldest first."""
    path = Path(path)
    copies = {}
    for copy in sorted((path.parent / HISTORY).glob(f"{path.stem}-*{path.suffix}")):
        stamp = copy.name[len(path.stem) + 1:-len(path.suffix)]
        if STAMP.fullmatch(stamp):
            copies[stamp] = copy
    return dict(sorted(copies.items()))


def configuration_of(folder: Path) -> dict[str, str]:
    """model, gpu, backend, precision and the folder's name (`<backend>_<precision>`) of a
    configuration folder, `<model>/<gpu>/<configuration>`, one kept in a dated set,
    `<model>/<gpu>/<set>/<configuration>`, or in a pass of one (SET_PASSES),
    `<model>/<gpu>/<set>/<pass>/<configuration>` (then "set": `<set>` or `<set>/<pass>`,
    else "")."""
    folder = Path(folder).absolute()
    backend, precision = folder.name.rsplit("_", 1)
    depth = next((d for d in (1, 2) if (folder.parents[d - 1] / SET_NOTES).is_file()
                  and (d == 1 or folder.parent.name in SET_PASSES)), 0)
    return {"model": folder.parents[depth + 1].name, "gpu": folder.parents[depth].name,
            "backend": backend, "precision": precision, "name": folder.name,
            "set": "/".join(p.name for p in reversed(folder.parents[:depth]))}


def set_configurations(kept: Path) -> list[Path]:
    """The configuration folders of a dated set: `<set>/<configuration>` and those of its
    passes, `<set>/<pass>/<configuration>`."""
    return sorted(p for pattern in ("*_*", *(f"{n}/*_*" for n in SET_PASSES))
                  for p in Path(kept).glob(pattern) if p.is_dir())


def beside_a_neighbour(folder: Path) -> bool:
    """Whether a configuration was measured while another ran on the same host: kept in
    a side-by-side run's `together/` pass."""
    return Path(folder).parent.name == BESIDE_A_NEIGHBOUR \
        and (Path(folder).parents[1] / SET_NOTES).is_file()
