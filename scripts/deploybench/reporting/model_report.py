"""A model's README: its headline first (reporting.headline: a line a configuration, the
fastest), every configuration built so far, the frontier plots, the configuration searches
and dated measurement sets beside it, and the published tables where the model has them."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from .. import search as configuration_search
from ..records import facts, formats, layout
from ..records.tables import (
    SHARED_MEMORY,
    THROUGHPUT,
    lead_mode,
    published_gpus,
    read_perf,
    reference_rows,
)
from ..settings.cluster import CPU_KEY
from .beside import NOT_A_REPRODUCTION, columns_beside, hardware_section, otherwise_section
from .headline import configuration_headline, model_lines
from .markdown import markdown_table
from .plots import frontier_plot
from .reference import (
    configuration_label,
    frontier_lines,
    reference_accuracy,
    reference_comparison,
    reference_latencies,
    reference_settings,
    sets_beside,
)
from .scenario_sources import measured_apart
from .served_native import at_max_batch, served_vs_native


def dated_sets_table(out: Path) -> pd.DataFrame:
    """A row per configuration of each dated measurement set beside model report `out`
    (a set without one, e.g. a probe, in one row): its notes' title and what it measured."""
    rows = []
    for folder in layout.dated_sets(out):
        notes = folder / layout.SET_NOTES
        title = notes.read_text().splitlines()[0].lstrip("# ").strip()
        where = notes.relative_to(Path(out).parent)
        configs = [c for c in layout.set_configurations(folder)
                   if any((c / f"{s}.csv").is_file() for s in ("offline", "online"))]
        for config in configs or [None]:
            row = {"GPU": folder.parent.name, "Set": f"[{folder.name}]({where})",
                   "What": title,
                   "Configuration": config.relative_to(folder).as_posix() if config else "",
                   "Best offline inf/s": None, "Online max inf/s": None}
            for scenario, column in (("offline", "Best offline inf/s"),
                                     ("online", "Online max inf/s")):
                if config and (config / f"{scenario}.csv").is_file():
                    row[column] = pd.read_csv(config / f"{scenario}.csv")[THROUGHPUT].max()
            rows.append(row)
    return pd.DataFrame(rows)


def _dated_line(dated: pd.DataFrame) -> str:
    """The headline's word on the dated sets: their fastest figures, which the rows above
    (the configuration folders) do not hold (later code, partial or repeated runs)."""
    if not len(dated):
        return ""
    best = []
    for scenario, column in (("offline", "Best offline inf/s"), ("online", "Online max inf/s")):
        if dated[column].notna().any():
            row = dated.loc[dated[column].idxmax()]
            name = re.match(r"\[(.*?)\]", row["Set"]).group(1)
            best.append(f"{scenario} {row[column]:,.0f} inf/s ({row['GPU']} {name}, "
                        f"{row['Configuration']})")
    return (f"\n- Dated measurement sets ({dated['Set'].nunique()}, below, each with its "
            f"notes): fastest " + "; fastest ".join(best) if best else "")


def searches_table(out: Path) -> pd.DataFrame:
    """A row per configuration search beside model report `out` (its search.json)."""
    rows = []
    for path in layout.searches(out):
        found = formats.read(path)
        # <gpu>/[<dated set>/]<configuration>/search
        where = path.parent.relative_to(Path(out).parent)
        budget = found["p99_budget_ms"]
        rank = found["rank"]
        row = {
            "GPU": where.parts[0],
            "Search": f"[{'/'.join(where.parts[1:-1])}]({where}/README.md)",
            "Strategy": f"{found['strategy']}, {len(found['points'])} of {len(found['grid'])}",
            "p99 budget (ms)": budget}
        for who, point in (("Winner", found["winner"]), ("Reference's values",
                                                         found["reference"])):
            result = found["results"].get(point)
            row |= {who: point, f"{who}: within the budget": _search_peak(result, budget, rank),
                    f"{who}: online peak": _search_peak(result, None, rank)}
        rows.append(row)
    return pd.DataFrame(rows)


def _search_peak(result: dict | None, budget_ms: float | None, rank: str) -> str:
    """A search point's throughput within the budget as its search ranked it (its best
    online level of all, without one), its concurrency (or the two levels interpolated
    between, ≈) and p99 ("not measured", "failed", "none" within the budget)."""
    if result is None:
        return "not measured"
    if result["status"] != configuration_search.OK:
        return "failed"
    top = configuration_search.at_budget(result, budget_ms, rank)
    if top is None:
        return "none"
    if "between" in top:
        low, high = top["between"]
        return f"≈{top['throughput']:,.0f} inf/s between {low} and {high}, p99 {budget_ms:g} ms"
    return (f"{top['throughput']:,.0f} inf/s at {top['concurrency']}, "
            f"p99 {top['p99_ms']:.2f} ms")


def _existing(path: Path) -> Path | None:
    return path if path.is_file() else None


def configuration_headlines(configs: list[Path]) -> dict[str, dict]:
    """Each configuration's headline facts (reporting.headline), by its label."""
    return {configuration_label(readme.parent): configuration_headline(
        readme.parent / "offline.csv", *(_existing(readme.parent / f"{name}.csv")
                                         for name in ("online", "native", "accuracy")),
        _existing(readme.parent / "rate.json"))
        for readme in configs}


CPU_BESIDE = (" The `cpu` columns ran on the CPU key (the host's CPUs, named in each "
              "configuration's report; settings below), every published row on the GPU "
              "its label names: other hardware, beside the tables, not a reproduction "
              "of them.")


SERVED_OTHERWISE = (" A `<gpu> <set>/<configuration>` column is the configuration of that "
                    "name measured as its folder's was, from the newest dated set that did "
                    "(one measured alone before any measured beside a neighbour, a "
                    "`together/` pass): served another way (`served by`) on the folder's GPU "
                    "key, or on a key with no folder of that name.")


def _in_sets(configs: list[Path]) -> bool:
    return any(layout.configuration_of(Path(c).parent)["set"] for c in configs)


def _on_cpu(configs: list[Path]) -> bool:
    return any(layout.configuration_of(Path(c).parent)["gpu"] == CPU_KEY for c in configs)


def _configuration_row(readme: Path) -> dict:
    """A configuration's line of the model report's table."""
    folder = readme.parent
    offline = read_perf(folder / "offline.csv")
    # a configuration without an online scenario (run_facts.serves_online) has no online.csv
    online = (pd.read_csv(folder / "online.csv") if (folder / "online.csv").is_file()
              else pd.DataFrame({THROUGHPUT: []}))
    mode = lead_mode(offline[SHARED_MEMORY])  # the references' mode first, the others beside
    best = offline.loc[offline[offline[SHARED_MEMORY] == mode][THROUGHPUT].idxmax()]
    others = offline[offline[SHARED_MEMORY] != mode].groupby(SHARED_MEMORY)[THROUGHPUT].max()
    where = layout.configuration_of(folder)
    gpu, config = where["gpu"], where["name"]
    try:
        ratio = at_max_batch(served_vs_native(folder / "offline.csv", folder / "native.csv"))
    except facts.DifferentDevices:  # the configuration's report says why
        ratio = {"served/native": None, SHARED_MEMORY: "(different devices)"}
    except FileNotFoundError:  # a remote server, or a repository served as it is
        ratio = {"served/native": None, SHARED_MEMORY: "(no native figure)"}
    return {
        "GPU": gpu, "Configuration": f"[{config}]({gpu}/{config}/README.md)",
        "Export": formats.read(folder / "offline.json")["export_precision"].upper(),
        "Best offline inf/s": best[THROUGHPUT], "at batch": int(best["Batch"]),
        "in shared memory": mode,
        "other shared memory": ", ".join(f"{m} {v:,.0f}" for m, v in others.items()),
        "Smallest offline batch": int(offline["Batch"].min()),
        "its avg latency (ms)": offline.loc[offline["Batch"].idxmin(), "avg latency (ms)"],
        "Online max inf/s": online[THROUGHPUT].max() if len(online) else None,
        "served/native at max batch": ratio["served/native"],
        "its shared memory": ratio[SHARED_MEMORY],
        "Scenarios measured": "apart (headline)" if measured_apart(folder) else "in one run",
    }


# The frontier plots' section; `plots`: each one's image, by a relative link
FRONTIER_SECTION = (
    "\n\n## Throughput against latency\n\nEach configuration's offline sweep (a point per "
    "batch) and online sweep (a point per concurrency) against p99 and average latency, per "
    "GPU key; dashed, the published tables of the same GPU, or, beside a GPU key without any "
    "(an H100), every published table, labelled with its GPU. A GPU configuration measured "
    "otherwise than its document's protocol is not drawn (a section below names it).\n\n"
    "{plots}")


def _frontier_section(configs: list[Path], spec: dict, out: Path, offline_frontier: Path,
                      online_frontier: Path, beside: list[Path] | None) -> str:
    """The frontier plots (drawn here) and their section; the published tables drawn beside
    the GPU keys of the columns measured as the document did (`beside`)."""
    pngs = (("offline", offline_frontier), ("online", online_frontier))
    for scenario, png in pngs:
        frontier_plot(frontier_lines(configs, spec.get("reference"), scenario, beside),
                      scenario, spec["title"], png)
    return FRONTIER_SECTION.format(plots="\n\n".join(
        f"![{s} frontier]({Path(png).relative_to(Path(out).parent)})" for s, png in pngs))


def _kept_apart_sections(out: Path, dated: pd.DataFrame) -> str:
    """The configuration searches and the dated measurement sets of the model."""
    text = ""
    searched = searches_table(out)
    if len(searched):
        text += ("\n\n## Configuration searches\n\nThe best Triton configuration under each "
                 "search's latency budget (online), against the configuration's own (the "
                 "reference's values); each search's README has every point, the frontier and "
                 "the winner's config.pbtxt.\n\n" + markdown_table(searched))
    if len(dated):
        text += ("\n\n## Dated measurement sets\n\nRuns kept apart from the configuration "
                 "folders (partial sweeps, repeats, probes), each with its notes, logs and "
                 "provenance; empty cells: not measured in that set.\n\n"
                 + markdown_table(dated))
    return text


def _about_the_reference(configs: list[Path], reference: dict) -> str:
    """Which configurations reproduce the published tables, the published accuracy beside
    the measured, and where the model is not run as its reference ran it."""
    text = ""
    if reference.get("pairs"):
        rows = reference_rows(Path(reference["path"]), reference["document"],
                              reference.get("where", {}))
        gpus = published_gpus(rows)
        pairs = pd.DataFrame([{"Published table": name, "Configuration": config,
                               "GPU keys": ", ".join(gpus.get(name, []))}
                              for name, config in reference["pairs"].items()])
        text += ("\n\n## The configurations that reproduce the published tables\n\n"
                 "`snakemake references` builds each on the GPU keys of its tables.\n\n"
                 + markdown_table(pairs))
    if reference.get("metrics"):
        accuracy = reference_accuracy(configs, reference)
        if len(accuracy):
            text += ("\n\n## Accuracy beside the published tables\n\nThe published value "
                     "of each table (the same on every GPU key where one value is shown) "
                     "and the accuracy step's on Triton for each configuration.\n\n"
                     + markdown_table(accuracy))
    if reference.get("differences"):
        text += ("\n\n## Where this model is not run as its reference ran it\n\n"
                 + "\n".join(f"- {item}" for item in reference["differences"]))
    return text


def _beside_the_reference(configs: list[Path], reference: dict) -> str:
    """The measured rows beside the published ones: throughput and latencies per scenario,
    and the settings each ran with."""
    where, path, document = (reference.get("where", {}), Path(reference["path"]),
                             reference["document"])
    narrowed = "".join(f", {k} {v}" for k, v in where.items())
    source = (f"Reference rows: `{reference['table']}` (parsed from {document})"
              f"{narrowed}. {NOT_A_REPRODUCTION}{CPU_BESIDE if _on_cpu(configs) else ''}"
              f"{SERVED_OTHERWISE if _in_sets(configs) else ''}\n\n")
    text = ""
    for scenario in ("offline", "online"):
        compared = reference_comparison(configs, path, document, where, scenario)
        if len(compared):
            text += (f"\n\n## {scenario.capitalize()}: inferences/second beside the "
                     f"published tables\n\n{source}" + markdown_table(compared))
        latencies = reference_latencies(configs, path, document, where, scenario)
        if len(latencies):
            text += (f"\n\n## {scenario.capitalize()}: latencies beside the published "
                     "tables\n\nAt each batch size and concurrency a published table "
                     "has; `avg latency (ms)` is the sum of the latency components, as "
                     "the references compute it.\n\n" + markdown_table(latencies))
    if configs:
        text += ("\n\n## Settings beside the published tables\n\nWhat each published "
                 "table states (tables stating the same in one column; empty: not "
                 "stated) and what each configuration ran with.\n\n"
                 + markdown_table(reference_settings(configs, path, document, where)))
    return text


# The model's README: its sections filled in by model_page
PAGE = """# {title}: results

{headline}

Every configuration of `{model}` built so far.

{configurations}{frontier}{kept_apart}{reference}
"""


def model_page(spec: dict, configs: list[Path], out: Path, offline_frontier: Path,
               online_frontier: Path) -> tuple[str, str]:
    """The model's headline (a line a configuration, the fastest; the HTML report's front
    page includes it) and its README `out`: every configuration of the model built so far
    (best offline throughput, lowest online latency, serving overhead) with links to their
    reports, and where the model has a reference table, GPU results beside the published
    ones (with the same configurations served another way, from the dated sets); the
    frontier plots drawn. `configs`: the configuration reports this run built; the others
    already on disk (committed GPU results) join them."""
    configs = sorted(set(layout.configuration_reports(out)) | {Path(c) for c in configs})
    reference = spec.get("reference")
    table = pd.DataFrame([_configuration_row(readme) for readme in configs])
    dated = dated_sets_table(out)
    lines = model_lines(configuration_headlines(configs)) + _dated_line(dated)
    beside, otherwise = reference_columns(configs, out, reference) if reference else (None, {})
    return lines, PAGE.format(
        title=spec["title"], headline=lines, model=spec["model"],
        configurations=markdown_table(table) if configs else "Nothing built yet.",
        frontier=_frontier_section(configs, spec, out, offline_frontier, online_frontier,
                                   beside),
        kept_apart=_kept_apart_sections(out, dated),
        reference=_about_the_reference(beside, reference) + hardware_section(beside, reference)
        + otherwise_section(otherwise) + _beside_the_reference(beside, reference)
        if reference else "")


def reference_columns(configs: list[Path], out: Path, reference: dict) -> tuple[list, dict]:
    """The columns beside the published tables (beside.columns_beside: those measured as
    the document did) of the configurations and their other ways of serving and machines
    (the dated sets': sets_beside), and the others with how each differs."""
    return columns_beside(configs + sets_beside(configs, layout.dated_sets(out)), reference)
