"""This pipeline's configurations beside a reference document's published rows:
inferences/second, latencies, settings and accuracy at the same batch and concurrency, and
the lines of the model report's frontier plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import formats, layout
from ..records.tables import (
    COMPONENT_SUM,
    REFERENCE_SERIES,
    SERVED_BY,
    SHARED_MEMORY,
    THROUGHPUT,
    lead_mode,
    read_perf,
    reference_rows,
    reference_series,
)
from ..settings.cluster import CPU_KEY
from .protocol import SETTINGS, scenarios_ran, setting_text
from .scenario_sources import measured_apart


def configuration_label(folder: Path) -> str:
    """A configuration's name in tables and plots: '<gpu key> <backend>_<precision>', or
    '<gpu key> <set>/<backend>_<precision>' for one kept in a dated set."""
    where = layout.configuration_of(folder)
    return f"{where['gpu']} {where['set'] + '/' if where['set'] else ''}{where['name']}"


def _served_by(folder: Path) -> tuple:
    """The ways of serving a configuration's offline rows record (e.g. deploybench, python)."""
    rows = read_perf(folder / "offline.csv")
    return tuple(sorted(map(str, rows[SERVED_BY].dropna().unique()))) if SERVED_BY in rows \
        else ()


def _measured_as(folder: Path) -> dict:
    """What must agree for two measurements of a configuration to stand side by side, by
    scenario measured: how perf_analyzer measured (how many warm-up windows aside: discarded,
    and recorded only since 2026-11-28), the Triton settings and the export's precision."""
    return {scenario: ({k: v for k, v in ran["perf_analyzer_settings"].items()
                        if k != "warmup_trials"}, ran["triton"], ran["export_precision"])
            for scenario, ran in scenarios_ran(folder).items()}


def _alike(one: dict, other: dict) -> bool:
    """Measured alike (_measured_as): offline the same, and online too where both have it."""
    both = one.keys() & other.keys()
    return "offline" in both and all(one[scenario] == other[scenario] for scenario in both)


def sets_beside(configs: list[Path], sets: list[Path]) -> list[Path]:
    """Beside each configuration folder (its README in `configs`), the newest configuration
    of the dated `sets` (or of their passes: layout.set_configurations) of the same name
    that measured it as the folder did (_measured_as), for each GPU key and way of serving:
    on the folder's own key, each way other than the folder's (the python backend's side
    of a reference pair the C++ backend serves); on a key with no folder of that name, every
    way (a pair's side measured on another machine). One measured alone comes before any
    measured beside a neighbour (layout.beside_a_neighbour), whatever their dates. Their
    (unbuilt) README paths, as `configs` name configurations."""
    folders = {(layout.configuration_of(r.parent)["gpu"], r.parent.name) for r in configs}
    kept = [c for s in sets for c in layout.set_configurations(s)]
    best: dict[tuple, tuple[tuple, Path]] = {}
    for readme in configs:
        folder = readme.parent
        if not (folder / "offline.json").is_file():
            continue
        own, gpu = _served_by(folder), layout.configuration_of(folder)["gpu"]
        measured = _measured_as(folder)
        for other in (c for c in kept if c.name == folder.name):
            key = layout.configuration_of(other)["gpu"]
            if not (other / "offline.json").is_file() or \
                    (key != gpu and (key, folder.name) in folders):
                continue
            way = _served_by(other)
            if way == () or (key == gpu and way == own) or \
                    not _alike(_measured_as(other), measured):
                continue
            date = formats.read(other / "offline.json")["provenance"]["date"]
            rank = (not layout.beside_a_neighbour(other), date)
            slot = (key, folder.name, way)  # one a key, name and way: folders may share it
            if slot not in best or rank > best[slot][0]:
                best[slot] = (rank, other / "README.md")
    return sorted(readme for _, readme in best.values())


# What tells the reference result tables of one document apart (the label of a column).
_REFERENCE_SERIES = ["gpu_key", *REFERENCE_SERIES]


def _reference_rows(reference_csv: Path, document: str, where: dict,
                    scenario: str) -> pd.DataFrame:
    """The published rows of a scenario with our names for batch and concurrency. A table
    without one of them (FastPitch's) ran offline at concurrency 1 and online at the batch
    Little's law gives."""
    ref = reference_rows(reference_csv, document, where, scenario).rename(
        columns={"batch": "Batch", "concurrency": "Concurrency"})
    ref["Concurrency"] = ref["Concurrency"].fillna(1)
    little = ref[THROUGHPUT] * ref["avg latency (ms)"] / 1e3 / ref["Concurrency"]
    ref["Batch"] = ref["Batch"].fillna(little.round())
    return ref.astype({"Batch": int, "Concurrency": int})


def _series_label(series: tuple) -> str:
    gpu, *rest = series
    return f"{gpu} {reference_series(*rest)} (reference)"


def _measured(configs: list[Path], scenario: str):
    """(GPU key, label, table) of each configuration's measured scenario (the CPU key's
    too: W&D, DLRM and DCNv2 have no other), one per shared-memory mode, labelled with the
    backend that served it."""
    for readme in configs:
        folder = readme.parent
        gpu = layout.configuration_of(folder)["gpu"]
        if not (folder / f"{scenario}.csv").is_file():
            continue
        measured = read_perf(folder / f"{scenario}.csv")
        lead = lead_mode(measured[SHARED_MEMORY])  # the references' mode first
        for mode, rows in sorted(measured.groupby(SHARED_MEMORY, sort=False),
                                 key=lambda group: group[0] != lead):
            notes = [] if mode in ("system", "none") else [f"{mode} shm"]
            served = rows[SERVED_BY].dropna().unique() if SERVED_BY in rows else []
            notes += [f"served by {', '.join(map(str, served))}"] if len(served) else []
            notes += ["scenarios measured apart"] if measured_apart(folder) else []
            yield gpu, configuration_label(folder) + (
                f" ({'; '.join(notes)})" if notes else ""), rows


def reference_latencies(configs: list[Path], reference_csv: Path, document: str,
                        where: dict, scenario: str) -> pd.DataFrame:
    """Throughput and latencies of the published rows and of this pipeline's
    configurations, joined on batch and concurrency (the published rows' pairs only);
    `avg latency (ms)` is the references' sum of components, ours summed the same way."""
    ref = _reference_rows(reference_csv, document, where, scenario)
    keys = ["Batch", "Concurrency"]
    columns = [THROUGHPUT, "p50 latency (ms)", "p90 latency (ms)", "p95 latency (ms)",
               "p99 latency (ms)", "avg latency (ms)"]
    parts = [rows[keys + columns].assign(Configuration=_series_label(series))
             for series, rows in ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False)]
    parts += [rows.assign(**{"avg latency (ms)": rows[COMPONENT_SUM]})[keys + columns]
              .assign(Configuration=label) for _, label, rows in _measured(configs, scenario)]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    pairs = ref[keys].drop_duplicates()
    table = table.merge(pairs, on=keys)  # only where a published row has the same pair
    ours = ~table["Configuration"].str.endswith("(reference)")
    if not ours.any():
        return pd.DataFrame()
    table = table.assign(_ours=ours).sort_values([*keys, "_ours", "Configuration"])
    return table[[*keys, "Configuration", *columns]].reset_index(drop=True)


def reference_settings(configs: list[Path], reference_csv: Path, document: str,
                       where: dict) -> pd.DataFrame:
    """The settings each published table states (series with the same settings in one
    column) beside the ones each configuration ran with; empty where a table says
    nothing."""
    ref = _reference_rows(reference_csv, document, where, "offline")
    columns: dict[str, list[str]] = {}
    for series, rows in ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False):
        values = tuple(setting_text(rows[c].iloc[0]) if c in rows else "" for c in SETTINGS)
        columns.setdefault(values, []).append(_series_label(series).removesuffix(" (reference)"))
    table = pd.DataFrame({"Setting": [name for name, _, _ in SETTINGS.values()]})
    for values, labels in columns.items():
        table[", ".join(labels) + " (reference)"] = values
    for readme in configs:
        folder = readme.parent
        where = layout.configuration_of(folder)
        ran = scenarios_ran(folder)
        table[configuration_label(folder)] = [
            setting_text(read(ran[scenario], where["backend"])) if scenario in ran else ""
            for _, scenario, read in SETTINGS.values()]
    return table


def reference_accuracy(configs: list[Path], reference: dict) -> pd.DataFrame:
    """The published tables' metrics (reference.metrics: their column -> our metric) beside
    each configuration's served value of the same metric (accuracy.csv)."""
    rows = reference_rows(Path(reference["path"]), reference["document"],
                          reference.get("where", {}))
    table = []
    for column, metric in reference["metrics"].items():
        for series, values in rows.groupby(REFERENCE_SERIES, dropna=False)[column]:
            published = sorted(set(values.dropna()))
            table.append({"Metric": metric,
                          "Configuration": f"{reference_series(*series)} (reference)",
                          "Value": " / ".join(f"{v:g}" for v in published)})
        for readme in configs:
            accuracy = pd.read_csv(readme.parent / "accuracy.csv")
            measured = accuracy[accuracy["name"] == metric]
            if len(measured):
                table.append({"Metric": metric,
                              "Configuration": configuration_label(readme.parent),
                              "Value": f"{measured['triton'].iloc[0]:.4g}"})
    return pd.DataFrame(table)


def reference_comparison(configs: list[Path], reference_csv: Path, document: str,
                         where: dict, scenario: str) -> pd.DataFrame:
    """Inferences/second of this pipeline's configurations beside the reference's published
    rows (every GPU, backend and precision of the document, narrowed by `where`: column ->
    value) at the same batch size and concurrency."""
    keys = ["Batch", "Concurrency"]
    ref = _reference_rows(reference_csv, document, where, scenario)
    if ref.empty:  # nothing published in this scenario (BERT's online): nothing beside
        return pd.DataFrame()
    table = None
    for _, label, rows in _measured(configs, scenario):
        ours = rows[[*keys, THROUGHPUT]].rename(columns={THROUGHPUT: label})
        table = ours if table is None else table.merge(ours, on=keys, how="outer")
    if table is None:
        return pd.DataFrame()
    for series, rows in ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False):
        published = rows[[*keys, THROUGHPUT]].drop_duplicates(keys).rename(
            columns={THROUGHPUT: _series_label(series)})
        table = table.merge(published, on=keys, how="left")
    return table.sort_values(keys)


def frontier_lines(configs: list[Path], reference: dict | None, scenario: str,
                   beside: list[Path] | None = None) -> list:
    """The lines of a scenario's frontier plot (plots.frontier_plot): each configuration's
    rows per shared-memory mode (`avg latency (ms)` the sum of components, as the published
    tables have it); beside a GPU key's, its published tables, or where it has none (an
    H100) every published table, labelled with its GPU. With `beside` (the columns measured
    as the document did), a GPU configuration not among them is left out: no published line
    is drawn beside it."""
    order = "Batch" if scenario == "offline" else "Concurrency"
    drawn = [c for c in configs if beside is None or Path(c) in set(map(Path, beside))
             or layout.configuration_of(Path(c).parent)["gpu"] == CPU_KEY]
    lines = [(gpu, label, False,
              rows.assign(**{"avg latency (ms)": rows[COMPONENT_SUM]}).sort_values(order))
             for gpu, label, rows in _measured(drawn, scenario)]
    if not reference:
        return lines
    ref = _reference_rows(Path(reference["path"]), reference["document"],
                          reference.get("where", {}), scenario)
    published = [(series, rows.sort_values(order)) for series, rows in
                 ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False)]
    for gpu in dict.fromkeys(gpu for gpu, *_ in lines):
        if gpu == CPU_KEY:  # no published row ran on a CPU
            continue
        own = [(series, rows) for series, rows in published if series[0] == gpu]
        lines += [(gpu, _series_label(series), True, rows) for series, rows in own or published]
    return lines
