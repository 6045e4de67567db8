"""The regression reports as pages: a configuration's compare.md (its headline, each
scenario's levels and verdicts, what differs in what the two sides ran on) and the model's,
each configuration summarised (deploybench.reporting.compare makes the comparisons)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import baseline, layout
from ..records.facts import CONTENDED_SHARE
from .compare import VERDICTS, Comparison, Scenario, compare_configuration
from .markdown import markdown_table


def _measurement(m: baseline.Measurement, report: dict) -> str:
    prov = report.get("provenance", {})
    ran = report.get("perf_analyzer_settings", {})
    repeats = ran.get("repeats", 1)  # native.json has no perf_analyzer_settings
    return (f"`{m.label}` (measured {prov.get('date', 'at an unrecorded date')}"
            + (f", stability {ran['stability_percentage']:g} %"
               if "stability_percentage" in ran else "")
            + (f", {repeats} runs a level" if repeats > 1 else "") + ")")


def _no_baseline(scenario: Scenario, setting: str) -> str:
    if scenario.current is None:
        return f"Not measured yet: no `{scenario.name}.csv` and `{scenario.name}.json`."
    if setting == baseline.PREVIOUS:
        why = f"no measurement before the current one (`{scenario.current.label}`) in history/"
    elif layout.STAMP.fullmatch(setting):
        why = f"no copy in history/ at or before {setting}"
    else:
        why = f"`{setting}` holds no `{scenario.name}.csv` and `{scenario.name}.json`"
    return f"No baseline yet: {why}."


def _grouped(found: dict) -> pd.DataFrame:
    return pd.DataFrame([{"what": what, "baseline": old, "current": new,
                          "scenarios": ", ".join(names)}
                         for what, values in found.items()
                         for (old, new), names in values.items()])


def _headline(comparison: Comparison) -> str:
    compared = [s for s in comparison.scenarios if s.table is not None]
    if not compared:
        return "**No baseline yet** for any scenario: nothing to compare."
    levels = sum(c for s in compared for v, c in s.counts.items() if v in VERDICTS[:4])
    changed_levels = {v: comparison.count(v) for v in ("faster", "slower", "mixed")}
    text = ", ".join(f"{n} {v}" for v, n in changed_levels.items() if n)
    return (f"**{text}** of {levels} compared levels, beyond the measured noise." if text
            else f"**No change beyond the measured noise** in {levels} compared levels.")


# A configuration's compare.md: its summary, then a section a scenario (SCENARIO, or why
# it has no baseline) and, where one was compared, what differs (DIFFERENCES)
CONFIGURATION_PAGE = """# Regression report: {title}

Current measurements against the baseline `{setting}` ({what}). {headline}

## Summary

{summary}

Noise, per side and level: the larger of the stability criterion the runs used
(perf_analyzer's `stability_percentage`; native rows, which perf_analyzer does not measure,
take the offline scenario's) and, with `perf.repeats`, the median's 95 % interval, in % of
the value. A level is faster or slower where its throughput or average latency (native:
median latency, device-resident throughput) differs beyond both sides' noise (the ranges
value ± noise do not overlap), mixed where they disagree; p99 is shown, not judged (no
stability criterion bounds it). `contended`: the side ran beside other load (more than
{contended_share:g} cores of other processes per CPU it could run on); `unstable`: the
side's level did not stabilise (kept by `perf.on_unstable: record`), its noise widened to
the spread of its windows.
{scenarios}{differences}"""
SCENARIO = """
## {name}

Current: {current}; baseline: {base}.

{table}
"""
DIFFERENCES = """
## Provenance differences

{provenance}

## Settings differences

{settings}

## Installed packages

{packages}
"""
# The model's compare.md: a row a configuration
MODEL_PAGE = """# Regression report: {title}

Every configuration of `{model}` built so far against the baseline `{setting}`: how many \
levels (batch sizes, concurrency levels, native batches) changed beyond the measured noise; \
each configuration's report has the levels and the differences.

## Configurations

{configurations}
"""


def render_configuration(title: str, comparison: Comparison) -> str:
    """A configuration's compare.md."""
    setting = comparison.setting
    what = {baseline.PREVIOUS: "each measurement's previous one in history/"}.get(
        setting, f"history stamp {setting}" if layout.STAMP.fullmatch(setting)
        else f"the measurements in `{setting}`")
    summary = pd.DataFrame([
        {"scenario": s.name,
         "current": s.current.label if s.current else "not measured",
         "baseline": s.base.label if s.base else "none",
         **{v: s.counts.get(v, 0) for v in VERDICTS}, "contended": s.contended}
        for s in comparison.scenarios])
    return CONFIGURATION_PAGE.format(
        title=title, setting=setting, what=what, headline=_headline(comparison),
        summary=markdown_table(summary), contended_share=CONTENDED_SHARE,
        scenarios="".join(_scenario_section(s, setting) for s in comparison.scenarios),
        differences=DIFFERENCES.format(
            provenance=_differences(comparison.provenance),
            settings=_differences(comparison.settings),
            packages="\n".join(f"- {p}" for p in comparison.packages) or "The same list.")
        if any(s.table is not None for s in comparison.scenarios) else "")


def _scenario_section(s: Scenario, setting: str) -> str:
    """A scenario's levels against its baseline, or why it has none."""
    if s.table is None:
        return f"\n## {s.name.capitalize()}\n\n{_no_baseline(s, setting)}\n"
    return SCENARIO.format(
        name=s.name.capitalize(), current=_measurement(s.current, s.current_report),
        base=_measurement(s.base, s.base_report),
        table=markdown_table(s.table.assign(verdict=s.table["verdict"].map(_bold))))


def _differences(found: dict) -> str:
    return markdown_table(_grouped(found)) if found else "None."


def _bold(verdict: str) -> str:
    return f"**{verdict}**" if verdict in ("faster", "slower", "mixed") else verdict


def model_page(spec: dict, folders: list[Path]) -> str:
    """The model's compare.md: each configuration (its folder) summarised against the
    baseline, linked to its compare.md."""
    rows = []
    for folder in folders:
        comparison = compare_configuration(folder, spec["baseline"])
        where = layout.configuration_of(folder)
        name = f"{where['gpu']}/{where['name']}"
        link = (f"[{name}]({name}/{layout.COMPARISON})"
                if (folder / layout.COMPARISON).is_file() else f"{name} (no compare.md)")
        compared = [s for s in comparison.scenarios if s.table is not None]
        rows.append({
            "configuration": link,
            "compared": ", ".join(s.name for s in compared) or "no baseline yet",
            **{v: comparison.count(v) for v in VERDICTS},
            "contended": sum(s.contended for s in compared),
            "provenance differences": ", ".join(comparison.provenance)
            + (f" ({len(comparison.packages)} package changes)" if comparison.packages
               else ""),
        })
    return MODEL_PAGE.format(
        title=spec["title"], model=spec["model"], setting=spec["baseline"],
        configurations=markdown_table(pd.DataFrame(rows)) if rows else "Nothing built yet.")
