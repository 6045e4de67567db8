"""A configuration search's README (deploybench.search): the best configuration within the
budget, every point measured, the frontier and the points that failed."""

from __future__ import annotations

import re
from pathlib import Path

from .. import search as configuration_search
from ..search import at_budget, peak

# The README; its tables' rows and the failed points' section filled in by search_page
PAGE = (
    "# Configuration search: {model} {gpu} {backend}_{precision}\n\n"
    "Strategy **{strategy}**: {measured} of the grid's {grid} points measured (reference "
    "configuration: `{reference}`); latency budget: {budget} (online); ranked by `{rank}`: "
    "{ranking}.\n\n"
    "| dimension | values |\n|---|---|\n{dimensions}\n"
    "## Best configuration\n\n"
    "- best within the budget ({budget}): {within}\n"
    "- best throughput overall: `{fastest}`: {fastest_level}\n"
    "- the configuration's own values (`{reference}`): {own}\n"
    "- winner (deploy this): `{chosen}`, its config: [{winner}]({winner})\n\n"
    "## Points\n\n"
    "Each point's served `config.pbtxt` beside its `point.json` (the `config` column).\n\n"
    "| point | {dims} | status | online peak inf/s | p99 at peak (ms) | best within budget "
    "| offline peak inf/s | config |\n"
    "|---|{dim_rules}---|---:|---:|---|---:|---|\n{points}\n"
    "## Frontier\n\n"
    "![online frontier]({frontier})\n\n"
    "Online throughput against p99 and average latency, one line per measured point (a "
    "marker per concurrency level).\n{scaling}{failed}")
SCALING = (
    "\n## Scaling over GPUs\n\n"
    "Each point against the point with the same other values on the fewest GPUs: its online "
    "peak and its offline throughput at its largest batch, in all and per GPU (capacity "
    "planning's number), and the ratio to the fewest GPUs' (N GPUs ideally give N times "
    "its throughput).\n\n"
    "| point | GPUs | online peak inf/s | per GPU | x | offline at the largest batch "
    "inf/s | per GPU | x |\n|---|---:|---:|---:|---:|---:|---:|---:|\n{rows}")
FAILED = ("\n## Failed points\n\n"
          "Recorded, not retried; the search went on without them.\n\n{points}")
FAILED_POINT = ("### {name} ({scenario})\n\n```\n{lines}\n```\n"
                "(in full: [{name}/point.json]({name}/point.json), its logs in `{name}/logs/`)\n")
RANKING = {"interpolated": "throughput at the budget, interpolated in p99 between the last "
           "level within it and the next beyond it where that is higher than the best level "
           "measured within it (marked ≈)",
           "measured": "the best level measured within the budget"}


def search_page(spec: dict, results: dict, within: str | None, fastest: str, chosen: str,
                winner: Path, folder: Path, frontier: Path) -> str:
    """The search's README (in `folder`): `results`, point -> its point.json; `within`,
    `fastest`, `chosen`: the best point within the budget, the fastest, the winner;
    `winner`: the winner's config.pbtxt as the search wrote it; `frontier`: its plot. The
    configs are linked, not inlined (a page of them was 880 of a README's 916 lines)."""
    search, key = spec["search"], spec["key"]
    budget, rank = search.get("p99_budget_ms"), search["rank"]
    dims = list(configuration_search.lists(search))
    budget_text = f"p99 ≤ {budget} ms" if budget is not None else "no budget set"
    failed = [n for n in spec["points"] if results[n]["status"] != configuration_search.OK]
    return PAGE.format(
        **key, strategy=search["strategy"], measured=len(spec["points"]),
        grid=len(spec["grid"]), reference=spec["reference"], budget=budget_text, rank=rank,
        ranking=RANKING[rank],
        dimensions="".join(f"| {d} | {', '.join(map(str, v))} |\n"
                           for d, v in configuration_search.lists(search).items()),
        within=(f"`{within}`: {_within(results[within], budget, rank)}" if within
                else "no measured point has an online level within the budget"),
        fastest=fastest, fastest_level=_level(peak(results[fastest], None)),
        own=_reference(results, spec["reference"], chosen), chosen=chosen,
        winner=Path(winner).relative_to(folder).as_posix(),
        dims=" | ".join(dims), dim_rules="---|" * len(dims),
        points="".join(_point_row(name, results[name], dims, budget, rank) + "\n"
                       for name in spec["points"]),
        frontier=frontier.relative_to(folder).as_posix(),
        scaling=_scaling(spec["points"], results),
        failed=FAILED.format(points="\n".join(
            FAILED_POINT.format(name=name, scenario=results[name]["scenario"],
                                lines="\n".join(summary(results[name]["reason"])))
            for name in failed)) if failed else "")


def _point_row(name: str, result: dict, dims: list[str], budget: float | None,
               rank: str) -> str:
    """A point's row of the README's table: its values, status, online peak and its p99,
    best within the budget, offline peak."""
    values = " | ".join(_value(result["values"][d]) for d in dims)
    if result["status"] != configuration_search.OK:
        reason = " ".join(summary(result["reason"])[:2])[:300].replace("|", "/")
        return f"| [{name}]({name}/point.json) | {values} | failed ({reason}) | | | | | |"
    top = peak(result, None)
    offline = max((r["throughput"] for r in result.get("offline", [])), default=None)
    offline = "not measured" if offline is None else f"{offline:,.0f}"
    return (f"| [{name}]({name}/point.json) | {values} | ok | {top['throughput']:,.0f} "
            f"| {top['p99_ms']:.2f} | {_within(result, budget, rank)} | {offline} "
            f"| [config.pbtxt]({name}/config.pbtxt) |")


def _scaling(points: list[str], results: dict) -> str:
    """The scaling section where points differ only in their GPU count (search.gpus);
    empty otherwise. A failed point's row says so."""
    measured = [n for n in points if "gpus" in results[n]["values"]]
    groups: dict[str, list[str]] = {}
    for name in measured:
        others = {d: v for d, v in results[name]["values"].items() if d != "gpus"}
        groups.setdefault(configuration_search.point_name(others), []).append(name)
    rows = []
    for names in groups.values():
        if len(names) < 2:
            continue
        names.sort(key=lambda n: results[n]["values"]["gpus"])
        base = _scaled(results[names[0]])
        for name in names:
            rows.append(_scaling_row(name, results[name], base))
    return SCALING.format(rows="".join(rows)) if rows else ""


def _scaled(result: dict) -> tuple[float | None, float | None]:
    """A point's online peak and offline throughput at its largest batch (None: not
    measured, or failed)."""
    top = peak(result, None)
    offline = result.get("offline") or []
    largest = max((r["batch"] for r in offline), default=None)
    at_largest = max((r["throughput"] for r in offline if r["batch"] == largest),
                     default=None)
    return (top["throughput"] if top else None), at_largest


def _scaling_row(name: str, result: dict, base: tuple) -> str:
    """A point's row of the scaling table, each throughput against the first point's
    (`base`: its online and offline throughput, as _scaled gives them)."""
    gpus = result["values"]["gpus"]
    if result["status"] != configuration_search.OK:
        return f"| [{name}]({name}/point.json) | {gpus} | failed | | | | | |\n"
    cells = []
    for own, first in zip(_scaled(result), base):
        if own is None:
            cells += ["not measured", "", ""]
            continue
        ratio = f"{own / first:.2f}" if first else ""
        cells += [f"{own:,.0f}", f"{own / gpus:,.0f}", ratio]
    return f"| [{name}]({name}/point.json) | {gpus} | {' | '.join(cells)} |\n"


def _reference(results: dict, reference: str, chosen: str) -> str:
    """The reference's point as measured by this search (its online peak and its p99), and the
    winner's peak against it."""
    if reference not in results:
        return "not measured by this search"
    if results[reference]["status"] != configuration_search.OK:
        return "failed"
    own, won = peak(results[reference], None), peak(results[chosen], None)
    return (f"online peak {_level(own)}; the winner's peak is "
            f"{won['throughput'] / own['throughput']:.2f}x its throughput, at "
            f"{won['p99_ms'] / own['p99_ms']:.2f}x its p99")


def _level(row: dict | None) -> str:
    """A level as measured, or the throughput at the budget interpolated between two."""
    if row is None:
        return "none"
    if "between" in row:
        low, high = row["between"]
        return (f"≈{row['throughput']:,.0f} inf/s at p99 {row['p99_ms']:g} ms, interpolated "
                f"between concurrency {low} and {high}")
    return (f"{row['throughput']:,.0f} inf/s at concurrency {row['concurrency']} "
            f"(p99 {row['p99_ms']:.2f} ms)")


def _within(result: dict, budget: float | None, rank: str) -> str:
    """A point's throughput within the budget as ranked, and its best level measured
    within it where the ranking interpolated."""
    ranked = at_budget(result, budget, rank)
    if ranked is None or "between" not in ranked:
        return _level(ranked)
    return f"{_level(ranked)}; measured: {_level(peak(result, budget))}"


def summary(reason: str) -> list[str]:
    """The lines of a failed point's reason that say why: its first, then the server's
    error lines (Triton's `E<date>` log lines, `error: ...`), or else the lines that
    follow it (perf_analyzer's message)."""
    lines = reason.strip().splitlines()
    errors = [re.sub(r"^E\d{4} [\d:.]+ \d+ \S+\] ", "", line) for line in lines[1:]
              if re.match(r"E\d{4} |error: ", line)]
    return [lines[0], *(errors or lines[1:9])]


def _value(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)
