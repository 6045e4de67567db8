"""Benchmark: the descent strategy of the configuration search against the grid (issue
19), as ratios, from a search whose grid was built (every point's point.json on disk).

It walks the descent over the grid's measured points (the same files a descent run reads:
deploybench.search.descent, fed from disk instead of Snakemake's checkpoints) and prints
its pick's throughput within the p99 budget against the grid's best, and the fraction of
the grid's points it measured. Targets: within 5 % of the grid's best (ratio >= 0.95)
while measuring at most half the points.

    python scripts/bench_search.py MODEL GPU BACKEND PRECISION [--budget MS] [--passes N]
        [--directory .]

Build the grid first: snakemake results/<model>/<gpu>/<backend>_<precision>/search/README.md
(strategy grid, the default). It measures nothing itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from deploybench import layout  # noqa: E402
from deploybench import search as configuration_search  # noqa: E402

THROUGHPUT_TARGET, POINTS_TARGET = 0.95, 0.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("model", "gpu", "backend", "precision"):
        parser.add_argument(name)
    parser.add_argument("--budget", type=float, help="p99 budget in ms (default: the search's)")
    parser.add_argument("--passes", type=int, help="descent passes (default: the search's)")
    parser.add_argument("--directory", type=Path, default=Path("."),
                        help="the workflow's directory (where results/ is)")
    args = parser.parse_args(argv)
    key = {k: getattr(args, k) for k in ("model", "gpu", "backend", "precision")}
    folder = args.directory / layout.fill(layout.search(""), **key)
    summary_path = folder / "search.json"
    if not summary_path.is_file():
        print(f"{summary_path}: no search built; build its grid first (snakemake "
              f"{folder / 'README.md'})", file=sys.stderr)
        return 1
    summary = json.loads(summary_path.read_text())
    missing = [n for n in summary["grid"] if not (folder / n / "point.json").is_file()]
    if missing:
        print(f"the grid is not built: {len(missing)} of {len(summary['grid'])} points missing "
              f"({', '.join(missing[:5])}...); build it with strategy grid", file=sys.stderr)
        return 1
    results = {n: json.loads((folder / n / "point.json").read_text()) for n in summary["grid"]}
    budget = args.budget if args.budget is not None else summary["p99_budget_ms"]
    search = {**summary["dimensions"],
              "descent_passes": args.passes or summary.get("descent_passes", 1)}
    seed = configuration_search.parse_point(summary["seed"])
    visited, pick = configuration_search.descent(search, seed, results.__getitem__, budget)
    best = configuration_search.best(results, budget)
    name = f"{key['model']}/{key['gpu']}/{key['backend']}_{key['precision']}"
    within = f"p99 <= {budget} ms" if budget is not None else "no budget"
    print(f"search {name}: grid of {len(results)} points, {within}")
    if best is None:
        print("no point of the grid has an online level within the budget")
        return 1

    def described(point):
        if point is None:
            return "none within the budget"
        return f"{point}, {configuration_search.score(results[point], budget):,.0f} inf/s"

    ratio = (configuration_search.score(results[pick], budget)
             / configuration_search.score(results[best], budget)) if pick else 0.0
    fraction = len(visited) / len(results)
    print(f"grid's best: {described(best)}")
    print(f"descent's pick: {described(pick)}, after {len(visited)} points "
          f"({' '.join(visited)})")
    print(f"descent / grid throughput within the budget: {ratio:.3f} "
          f"(target >= {THROUGHPUT_TARGET})")
    print(f"points measured: {len(visited)} of {len(results)} = {fraction:.2f} "
          f"(target <= {POINTS_TARGET})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
