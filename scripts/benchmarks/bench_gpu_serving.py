"""Benchmark: serving against its targets (issues 16 and 35), as ratios, from what the
pipeline measured (offline.csv, native.csv and, where it was measured, floor.csv of each
configuration on one GPU key), for each backend that served it: the python backend (its
stub process) and the pipeline's C++ backend (`deploybench`, libtorch in the server).

For every configuration under results/<model>/<gpu>/ (and in dated sets beside them) it
prints, per shared-memory mode and serving backend:
- served inferences/second at the largest batch, and served/native there (against the
  native column of the same data path: host I/O for system shared memory, device-resident
  for CUDA shared memory, measured on the same machine); target >= 0.90;
- the floors of both backends (the identity model's average latency) at batch 1 and at
  the largest batch, where the configuration's floor.csv has them;
- batch 1: served average latency against native latency + the floor of the backend that
  served it + 0.1 ms; target ratio <= 1.00;
then the two backends side by side per configuration and mode (the best served/native of
each over the sets, and the best served throughput of each: C++ against python), each row
with the engine that ran it (torch, onnxruntime, an ensemble's embeddings + onnxruntime:
the provenance's `engines`, or the configuration's runner where it recorded none), and for
the model named by --throughput-model its best served throughput at the largest batch
against --throughput-target (TFT electricity FP16 on the H100: 150,000 inf/s), per backend.
An ensemble's row counts as the backend serving both its parts, and carries served over the
native loop with the request already on the device (`served/device-native`): its host-array
native figure timed the request's making too until 2026-11-28 (served_native.UNMATCHED).

    python scripts/benchmarks/bench_gpu_serving.py [--gpu h100] [--results results]
        [--throughput-model tft] [--throughput-target 150000]

It measures nothing itself, so it can be re-read anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from deploybench.backends import BACKENDS as BACKENDS_BY_KEY
from deploybench.records.facts import DifferentDevices
from deploybench.records.tables import SERVED_BY, SHARED_MEMORY, THROUGHPUT, read_perf
from deploybench.reporting.markdown import markdown_table
from deploybench.reporting.served_native import served_vs_native

ROOT = Path(__file__).resolve().parents[2]

SERVED, NATIVE = f"{THROUGHPUT} served", f"{THROUGHPUT} native"
LATENCY_SLACK_MS = 0.1  # the allowance above native + floor at batch 1
BACKENDS = ("python", "deploybench")
FLOORS = [f"{b} floor ms (b1 / max)" for b in BACKENDS]
COLUMNS = ["configuration", "served by", "engine", "mode", "max batch", "served inf/s",
           "served/native", "served/device-native", *FLOORS, "batch-1 served ms",
           "native ms", "floor ms", "served / (native+floor+0.1)"]
DEVICE = "device-resident Inferences/Second"


def _serving(run: Path) -> tuple[str, str]:
    """(backend, engine) of a configuration's offline measurement: an ensemble's backend
    where both parts had the same, its engines joined; the runner of the configuration's key
    where the provenance recorded no engine (before 2026-11-28: libtorch's or python's)."""
    server = json.loads((run / "offline.json").read_text())["provenance"].get("server", {})
    parts, engines = server.get("ensemble_parts", {}), server.get("engines", {})
    backend = (parts and "+".join(sorted(set(parts.values())))) or server.get("served_by", "")
    runner = BACKENDS_BY_KEY[run.name.rsplit("_", 1)[0]].runner if run.name.rsplit(
        "_", 1)[0] in BACKENDS_BY_KEY else ""
    return backend, " + ".join(engines[m] for m in sorted(engines)) or runner


def _floor_ms(floor: pd.DataFrame | None, backend: str, mode: str, batch: int) -> float | None:
    if floor is None:
        return None
    row = floor[(floor[SERVED_BY] == backend) & (floor[SHARED_MEMORY] == mode)
                & (floor["Batch"] == batch)]
    return float(row["avg latency (ms)"].iloc[0]) if len(row) else None


def _floors(floor: pd.DataFrame | None, mode: str, top: int) -> dict:
    out = {}
    for backend, column in zip(BACKENDS, FLOORS):
        pair = [_floor_ms(floor, backend, mode, b) for b in (1, top)]
        if all(v is not None for v in pair):
            out[column] = f"{pair[0]:.3f} / {pair[1]:.3f}"
    return out


def served_rows(run: Path, name: str) -> list[dict]:
    """Served throughput at the largest batch, one row per shared-memory mode, with no
    native figure to set it against (none measured, or measured on another device)."""
    offline = read_perf(run / "offline.csv")
    top = offline[offline["Batch"] == offline["Batch"].max()]
    backend, engine = _serving(run)
    return [{"configuration": name, "served by": backend, "engine": engine,
             "mode": row[SHARED_MEMORY], "max batch": int(row["Batch"]),
             "served inf/s": round(row[THROUGHPUT])} for _, row in top.iterrows()]


def configuration_rows(run: Path, name: str) -> list[dict]:
    """One row per shared-memory mode of one configuration's measurements."""
    if not (run / "native.csv").is_file():
        print(f"{name}: no native.csv, served/native not computed", file=sys.stderr)
        return served_rows(run, name)
    try:
        ratio = served_vs_native(run / "offline.csv", run / "native.csv")
    except DifferentDevices as refused:
        print(f"{name}: {refused}", file=sys.stderr)
        return served_rows(run, name)
    offline, native = read_perf(run / "offline.csv"), pd.read_csv(run / "native.csv")
    floor = read_perf(run / "floor.csv") if (run / "floor.csv").is_file() else None
    served_by, engine = _serving(run)
    device = native.set_index("Batch")[DEVICE] if DEVICE in native else None
    rows = []
    for mode, by_mode in ratio.groupby(SHARED_MEMORY, sort=False):
        top = by_mode[by_mode["Batch"] == by_mode["Batch"].max()].iloc[0]
        on_device = device.get(top["Batch"]) if device is not None else None
        row = {"configuration": name, "served by": served_by, "engine": engine, "mode": mode,
               "max batch": int(top["Batch"]), "served inf/s": round(top[SERVED]),
               "served/native": round(top["served/native"], 3),
               "served/device-native": round(top[SERVED] / on_device, 3)
               if on_device and not pd.isna(on_device) else None,
               **_floors(floor, mode, int(top["Batch"]))}
        one = offline[(offline["Batch"] == 1) & (offline[SHARED_MEMORY] == mode)]
        native_one = native[native["Batch"] == 1]
        floor_ms = _floor_ms(floor, served_by, mode, 1)
        if len(one) and len(native_one) and floor_ms is not None:
            served_ms = float(one["avg latency (ms)"].iloc[0])
            column = ("device-resident median latency (ms)" if mode == "cuda"
                      else "median latency (ms)")
            native_ms = float(native_one[column].iloc[0])
            bound = native_ms + floor_ms + LATENCY_SLACK_MS
            row.update({"batch-1 served ms": round(served_ms, 3),
                        "native ms": round(native_ms, 3), "floor ms": round(floor_ms, 3),
                        "served / (native+floor+0.1)": round(served_ms / bound, 3)})
        rows.append(row)
    return rows


def side_by_side(table: pd.DataFrame) -> pd.DataFrame:
    """Per configuration key (model/backend_precision, whatever set measured it) and mode:
    the best served/native and the best served throughput of each serving backend, and
    their ratios (C++ against python)."""
    table = table.copy()
    table["key"] = [f"{c.split('/')[0]}/{c.split('/')[-1]}" for c in table["configuration"]]
    columns = {}
    for what in ("served/native", "served inf/s"):
        best = table.dropna(subset=[what]).groupby(["key", "mode", "served by"])[what].max()
        best = best.unstack().reindex(columns=[b for b in BACKENDS if b in set(
            table["served by"])])
        for b in best.columns:
            columns[f"{b} {what}"] = best[b]
        if set(BACKENDS) <= set(best.columns):
            columns[f"deploybench / python ({what})"] = (best["deploybench"]
                                                          / best["python"]).round(3)
    return pd.DataFrame(columns).reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--throughput-model", default="tft")
    parser.add_argument("--throughput-target", type=float, default=150_000)
    args = parser.parse_args()

    # a configuration's folder, or one inside a dated set of measurements beside them
    # (results/<model>/<gpu>/<set>/<configuration>/, committed from lent machines)
    runs = sorted(p.parent for pattern in (f"*/{args.gpu}/*/offline.csv",
                                           f"*/{args.gpu}/*/*/offline.csv")
                  for p in args.results.glob(pattern))
    if not runs:
        sys.exit(f"no configuration with offline.csv under "
                 f"{args.results}/*/{args.gpu}/: build them first (docs/gpus.md)")
    rows = []
    for run in runs:
        name = "/".join(p for p in run.relative_to(args.results).parts if p != args.gpu)
        rows += configuration_rows(run, name)
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    print(markdown_table(table))
    print()
    print(markdown_table(side_by_side(table)))
    for backend in BACKENDS:
        mine = table[table["served by"] == backend]
        ratios = mine["served/native"].dropna()
        bound = mine["served / (native+floor+0.1)"].dropna()
        print(f"\n{backend}: served/native at max batch >= 0.90: {(ratios >= 0.9).sum()} of "
              f"{len(ratios)} rows with a native figure on the same device ({len(mine)} rows)"
              + (f"; batch-1 latency <= native + its floor + 0.1 ms: {(bound <= 1).sum()} of "
                 f"{len(bound)} rows with a floor" if len(bound) else ""))
        tft = mine[mine["configuration"].str.startswith(f"{args.throughput_model}/")
                   & mine["configuration"].str.endswith("_fp16")]
        if len(tft):
            best = tft.loc[tft["served inf/s"].idxmax()]
            print(f"{backend}: {args.throughput_model} FP16 best served at max batch: "
                  f"{best['served inf/s']:,} inf/s ({best['configuration']}, {best['mode']}); "
                  f"/ target {args.throughput_target:,.0f}: "
                  f"{best['served inf/s'] / args.throughput_target:.3f}")


if __name__ == "__main__":
    main()
