"""What measuring side by side on two GPUs costs (config/runs/two-gpus.yaml,
scripts/machines/two_gpus.sh): for each configuration, every offline and online level measured
together (two configurations at once, a GPU each) against the same level measured alone,
as ratios, beside the levels' own window spread (perf_analyzer's stability); each pass's
wall time against the time its jobs took one at a time; and the search's scaling over GPUs.

    python scripts/benchmarks/bench_two_gpus.py results/tft/h100/two-gpus-2026-11-27 \
        results/bert/h100/two-gpus-2026-11-27

Each SET folder holds `together/<configuration>/` and `alone/<configuration>/` (their
offline and online CSVs and benchmarks/), and may hold `again/<configuration>/` (the alone
pass once more: how far a fresh server's run moves on its own); the first SET's
`phases.tsv` holds the passes' wall times and its `<configuration>/search/search.json`, if
any, the scaling.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import pandas as pd

KEY = ["Batch", "Concurrency", "Shared memory"]
THROUGHPUT, P99, SPREAD = "Inferences/Second", "p99 latency (ms)", "window spread (%)"


def configuration(folder: Path) -> Path:
    """The one configuration folder (`<backend>_<precision>`) under `folder`."""
    found = [p for p in folder.iterdir() if p.is_dir()]
    if len(found) != 1:
        sys.exit(f"{folder}: expected one configuration folder, found "
                 f"{', '.join(p.name for p in found) or 'none'}")
    return found[0]


def levels(together: Path, alone: Path, scenario: str) -> pd.DataFrame:
    """Each level of a scenario measured both ways: throughput and p99 ratios (together /
    alone), and the larger of the two window spreads."""
    both = pd.read_csv(together / f"{scenario}.csv").merge(
        pd.read_csv(alone / f"{scenario}.csv"), on=KEY, suffixes=(" together", " alone"))
    return pd.DataFrame({
        **{k: both[k] for k in KEY},
        "together inf/s": both[f"{THROUGHPUT} together"],
        "alone inf/s": both[f"{THROUGHPUT} alone"],
        "throughput x": both[f"{THROUGHPUT} together"] / both[f"{THROUGHPUT} alone"],
        "p99 x": both[f"{P99} together"] / both[f"{P99} alone"],
        "window spread % (max)": both[[f"{SPREAD} together", f"{SPREAD} alone"]].max(axis=1),
    })


def job_seconds(folder: Path) -> float:
    """The offline and online jobs' wall time (Snakemake's benchmark files)."""
    return sum(float((folder / "benchmarks" / f"{s}.tsv").read_text().splitlines()[1]
                     .split("\t")[0]) for s in ("offline", "online"))


def compare(sets: list[Path]) -> dict:
    """Print each configuration's levels; return its jobs' seconds, both ways. A set with
    `again/` (the alone pass once more) also prints again / alone: the run-to-run noise of a
    fresh server on the same GPU, the yardstick for together / alone."""
    seconds = {}
    for folder in sets:
        together, alone = (configuration(folder / way) for way in ("together", "alone"))
        again = configuration(folder / "again") if (folder / "again").is_dir() else None
        name = f"{folder.parent.parent.name} {together.name}"
        for scenario in ("offline", "online"):
            table = levels(together, alone, scenario)
            if again:  # matched level by level, as together's are
                noise = levels(again, alone, scenario)[[*KEY, "throughput x"]]
                table = table.merge(noise.rename(columns={"throughput x": "again x"}),
                                    on=KEY, how="left")
            print(f"\n## {name} {scenario}: together / alone"
                  + (", again / alone" if again else "") + "\n")
            print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            for column in ["throughput x", *(["again x"] if again else [])]:
                ratios = table[column]
                print(f"{column}: median {statistics.median(ratios):.3f}, range "
                      f"{ratios.min():.3f}-{ratios.max():.3f}; |x - 1| median "
                      f"{statistics.median(abs(ratios - 1)):.3f}")
            print(f"window spread median {table['window spread % (max)'].median():.1f} %")
        seconds[name] = {"together": job_seconds(together), "alone": job_seconds(alone)}
    return seconds


def passes(phases: Path, seconds: dict) -> None:
    table = pd.read_csv(phases, sep="\t")
    # a pass of several runs (alone: a step at a time, each where it ran together) sums them
    wall = (table["end"] - table["start"]).groupby(table["pass"]).sum().to_dict()
    print("\n## Passes\n")
    print(table.assign(seconds=table["end"] - table["start"]).to_string(index=False))
    for name, s in seconds.items():
        print(f"{name}: offline + online jobs {s['together']:.0f} s together, "
              f"{s['alone']:.0f} s alone")
    longest = max(s["alone"] for s in seconds.values())
    if {"together", "alone"} <= set(wall):
        print(f"together pass {wall['together']} s = {wall['together'] / longest:.2f}x the "
              f"longer configuration's jobs alone ({longest:.0f} s); alone pass "
              f"{wall['alone']} s = {wall['alone'] / wall['together']:.2f}x the together pass")


def scaling(search_json: Path) -> None:
    results = json.loads(search_json.read_text())["results"]
    print("\n## Scaling over GPUs\n")
    base = {}
    for name, result in sorted(results.items(), key=lambda r: r[1]["values"].get("gpus", 1)):
        gpus = result["values"].get("gpus", 1)
        if result["status"] != "ok":
            print(f"{name}: failed")
            continue
        online = max(r["throughput"] for r in result["online"])
        offline = max((r["throughput"] for r in result.get("offline", [])), default=0.0)
        base = base or {"online": online, "offline": offline}
        print(f"{name} ({gpus} GPU): online peak {online:,.0f} inf/s ({online / gpus:,.0f} a "
              f"GPU, {online / base['online']:.2f}x); offline {offline:,.0f} inf/s "
              f"({offline / gpus:,.0f} a GPU, "
              f"{offline / base['offline'] if base['offline'] else float('nan'):.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="+", type=Path)
    sets = parser.parse_args().sets
    seconds = compare(sets)
    if (sets[0] / "phases.tsv").is_file():
        passes(sets[0] / "phases.tsv", seconds)
    for search_json in sorted(sets[0].glob("**/search/search.json")):
        scaling(search_json)


if __name__ == "__main__":
    main()
