"""Benchmark: the descent strategy of the configuration search against the grid (issue
19), as ratios, from a search whose grid was built (every point's point.json on disk).

It walks the descent over the grid's measured points (the same files a descent run reads:
deploybench.search.descent, fed from disk instead of Snakemake's checkpoints) and prints
its pick's throughput within the p99 budget against the grid's best, and the fraction of
the grid's points it measured. Targets: within 5 % of the grid's best (ratio >= 0.95)
while measuring at most half the points.

    python scripts/benchmarks/bench_search.py MODEL GPU BACKEND PRECISION [--budget MS] [--passes N]
        [--rank interpolated|measured] [--directory .]
    python scripts/benchmarks/bench_search.py \
        --folder results/tft/h100/search-2026-11-25/aoti-cg_fp16/search
        --measured   # a search kept in a dated set, its grid partly measured
    python scripts/benchmarks/bench_search.py --folder .../search --runs .../second-machine
        # and over every combination of each point's runs (repeats kept elsewhere)

With `--runs FOLDER` (repeatable: a folder of `<point>/online.csv`, or of every run of a
point in `<point>/history/online-*.csv`, e.g. repeats on another machine) each point has
its search's run and these: the comparison is made for every combination of one run a
point (a seeded sample of 20,000 where there are more), and printed as the spread of the
ratio, how often it meets the target, and which points were picked: whether a single
run's comparison says anything, given how much a point's runs differ.

Build the grid first: snakemake results/<model>/<gpu>/<backend>_<precision>/search/README.md
(strategy grid, the default). It measures nothing itself.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

from deploybench import search as configuration_search
from deploybench.records import formats, layout
from deploybench.records.tables import read_perf
from deploybench.steps.search import point_rows

ROOT = Path(__file__).resolve().parents[2]

THROUGHPUT_TARGET, POINTS_TARGET = 0.95, 0.5
COMBINATIONS = 20_000  # at most, over --runs: a seeded sample where there are more


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("key", nargs="*", metavar="MODEL GPU BACKEND PRECISION",
                        help="the configuration whose search to read")
    parser.add_argument("--folder", type=Path,
                        help="a search folder instead (e.g. one kept in a dated set)")
    parser.add_argument("--measured", action="store_true",
                        help="a partial grid: against the best of the points measured so far "
                             "(a missing point could beat it; the output says how many)")
    parser.add_argument("--budget", type=float, help="p99 budget in ms (default: the search's)")
    parser.add_argument("--passes", type=int, help="descent passes (default: the search's)")
    parser.add_argument("--rank", choices=configuration_search.RANKS,
                        help="how a point's throughput within the budget is read from its "
                             "levels (default: the search's; searches made before "
                             "search.rank ranked measured levels)")
    parser.add_argument("--runs", type=Path, action="append", default=[], metavar="FOLDER",
                        help="more runs of the grid's points (<point>/online.csv or "
                             "<point>/history/online-*.csv): compare over every combination")
    parser.add_argument("--directory", type=Path, default=Path("."),
                        help="the workflow's directory (where results/ is)")
    return parser


def _read(folder: Path, measured: bool) -> tuple[dict, dict, list] | None:
    """A search's summary, the results of its points measured and the names of those
    missing; None (said on stderr) where there is no search or its grid is incomplete."""
    summary_path = folder / "search.json"
    if not summary_path.is_file():
        print(f"{summary_path}: no search built; build its grid first (snakemake "
              f"{folder / 'README.md'})", file=sys.stderr)
        return None
    summary = formats.read(summary_path)
    missing = [n for n in summary["grid"] if not (folder / n / "point.json").is_file()]
    if missing and not measured:
        print(f"the grid is not built: {len(missing)} of {len(summary['grid'])} points missing "
              f"({', '.join(missing[:5])}...); build it with strategy grid, or compare with the "
              "points measured (--measured)", file=sys.stderr)
        return None
    results = {n: formats.read(folder / n / "point.json")
               for n in summary["grid"] if n not in missing}
    return summary, results, missing


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if (len(args.key) == 4) == (args.folder is not None):
        parser.error("give either MODEL GPU BACKEND PRECISION or --folder")
    if args.folder is not None:
        folder = args.folder
    else:
        key = dict(zip(("model", "gpu", "backend", "precision"), args.key))
        folder = args.directory / layout.fill(layout.search(""), **key)
    found = _read(folder, args.measured)
    if found is None:
        return 1
    summary, results, missing = found
    key = summary["key"]
    budget = args.budget if args.budget is not None else summary["p99_budget_ms"]
    rank = args.rank or summary["rank"]
    search = {**summary["dimensions"],
              "descent_passes": args.passes or summary.get("descent_passes", 1)}
    reference = configuration_search.parse_point(summary["reference"])
    try:
        visited, pick = configuration_search.descent(search, reference, results.__getitem__,
                                                     budget, rank)
    except KeyError as err:
        print(f"the descent needs point {err} of the grid, which is not measured",
              file=sys.stderr)
        return 1
    best = configuration_search.best(results, budget, rank)
    name = f"{key['model']}/{key['gpu']}/{key['backend']}_{key['precision']}"
    within = f"p99 <= {budget} ms, ranked {rank}" if budget is not None else "no budget"
    print(f"search {name}: grid of {len(summary['grid'])} points, {len(results)} measured"
          f"{' (the grid best below is of those)' if missing else ''}, {within}")
    if best is None:
        print("no point of the grid has an online level within the budget")
        return 1

    def described(point):
        if point is None:
            return "none within the budget"
        return f"{point}, {configuration_search.score(results[point], budget, rank):,.0f} inf/s"

    ratio = (configuration_search.score(results[pick], budget, rank)
             / configuration_search.score(results[best], budget, rank)) if pick else 0.0
    fraction = len(visited) / len(summary["grid"])
    print(f"grid's best: {described(best)}")
    print(f"descent's pick: {described(pick)}, after {len(visited)} points "
          f"({' '.join(visited)})")
    print(f"descent / grid throughput within the budget: {ratio:.3f} "
          f"(target >= {THROUGHPUT_TARGET})")
    print(f"points measured: {len(visited)} of {len(summary['grid'])} = {fraction:.2f} "
          f"(target <= {POINTS_TARGET})")
    if args.runs:
        return over_runs(results, args.runs, search, reference, budget, rank)
    return 0


def runs_of(results: dict[str, dict], folders: list[Path]) -> dict[str, list[dict]]:
    """Each point's runs: its search's, then every online table of it under `folders`
    (another search's folder too)."""
    runs = {name: [result] for name, result in results.items()}
    for folder in folders:
        if not folder.is_dir():
            raise SystemExit(f"--runs {folder}: not a folder")
        for point in sorted(p for p in folder.iterdir() if p.is_dir()):
            tables = (sorted((point / "history").glob("online-*.csv"))
                      or [t for t in [point / "online.csv"] if t.is_file()])
            if not tables:  # not a point's folder (a search's logs/, winner/)
                continue
            if point.name not in runs:
                raise SystemExit(f"--runs {folder}: '{point.name}' is not a measured point of "
                                 f"this search ({', '.join(sorted(runs))})")
            runs[point.name] += [{"status": configuration_search.OK,
                                  "online": point_rows(read_perf(t))} for t in tables]
    return runs


def over_runs(results: dict, folders: list[Path], search: dict, reference: dict,
              budget: float | None, rank: str) -> int:
    """The descent against the grid over every combination of one run a point."""
    runs = runs_of(results, folders)
    names = list(runs)
    total = 1
    for name in names:
        total *= len(runs[name])
    combos = itertools.product(*(range(len(runs[n])) for n in names))
    if total > COMBINATIONS:
        rng = random.Random(0)
        combos = ([rng.randrange(len(runs[n])) for n in names] for _ in range(COMBINATIONS))
    ratios, picks, bests = [], Counter(), Counter()
    for combo in combos:
        chosen = {n: runs[n][i] for n, i in zip(names, combo)}
        try:
            _, pick = configuration_search.descent(search, reference, chosen.__getitem__,
                                                   budget, rank)
        except KeyError as err:
            print(f"the descent needs point {err}, which is not measured", file=sys.stderr)
            return 1
        best = configuration_search.best(chosen, budget, rank)
        ratios.append(configuration_search.score(chosen[pick], budget, rank)
                      / configuration_search.score(chosen[best], budget, rank)
                      if pick and best else 0.0)
        picks[pick] += 1
        bests[best] += 1
    repeated = sorted(len(r) for r in runs.values() if len(r) > 1)
    n = len(ratios)
    print(f"over {n:,} combinations of each point's runs"
          f"{' (a seeded sample)' if total > n else ''}: {len(repeated)} points with "
          f"{repeated[0] if repeated else 1}-{repeated[-1] if repeated else 1} runs")
    print(f"descent / grid within the budget: min {min(ratios):.3f}, median "
          f"{statistics.median(ratios):.3f}, >= {THROUGHPUT_TARGET} in "
          f"{sum(r >= THROUGHPUT_TARGET for r in ratios) / n:.0%}")

    def shares(counter):
        return ", ".join(f"{name} {count / n:.0%}" for name, count in counter.most_common())

    print(f"grid's best: {shares(bests)}")
    print(f"descent's pick: {shares(picks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
