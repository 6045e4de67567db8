"""The columns of every table the pipeline writes, and the gates that read them.

Performance tables keep the reference documents' columns and units (milliseconds), so a
row of ours and a published row line up column by column.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .tail import PERCENTILES

# The latency columns of the reference results tables, in their order; the first seven
# are the components that add up to the average latency (stacked in the online plot).
LATENCY_COLUMNS = [
    "Client Send (ms)", "Network+Server Send/Recv (ms)", "Server Queue (ms)",
    "Server Compute Input (ms)", "Server Compute Infer (ms)", "Server Compute Output (ms)",
    "Client Recv (ms)", "p50 latency (ms)", "p90 latency (ms)", "p95 latency (ms)",
    "p99 latency (ms)", "avg latency (ms)",
]
COMPONENTS = LATENCY_COLUMNS[:7]
THROUGHPUT = "Inferences/Second"
SHARED_MEMORY = "Shared memory"  # system, cuda, or none (inputs in the requests)
# The modes the reference documents measured in: system shared memory, or none (FastPitch's
# inputs in its HTTP requests). No document used CUDA shared memory: a figure in it stands
# beside the comparable one, never in its place.
REFERENCE_MODES = ("system", "none")


def lead_mode(modes) -> str:
    """The shared-memory mode a table's figures lead with: the first of REFERENCE_MODES it
    measured, else (CUDA shared memory alone) its first."""
    modes = list(dict.fromkeys(modes))
    if not modes:
        raise ValueError("no shared-memory mode: the table has no rows")
    return next((m for m in REFERENCE_MODES if m in modes), modes[0])
# The reference documents' "avg latency" is this sum (their runners add the components),
# perf_analyzer's own average (avg latency) is measured end to end: both are kept.
COMPONENT_SUM = "sum of components (ms)"
# The Triton backend that served a row: python (its stub process), deploybench (the
# pipeline's C++ backend, libtorch in the server) or a framework backend of a full Triton.
SERVED_BY = "Served by"
# offline.csv, online.csv, floor.csv: the reference columns first, then ours
# Whether perf_analyzer's last windows agreed within perf.stability_percentage in one of
# the level's attempts; a level that never did is measured once more and kept, flagged
# (perf.on_unstable: record). The spread: the largest of throughput's and average latency's
# (max - min) / mean over the windows the row was measured on, in %.
STABLE = "Stable"
WINDOW_SPREAD = "window spread (%)"
PERF_COLUMNS = ["Batch", "Concurrency", THROUGHPUT, *LATENCY_COLUMNS, SHARED_MEMORY,
                COMPONENT_SUM, SERVED_BY, STABLE, WINDOW_SPREAD]
# Every request's tail (deploybench.records.tail) beside a row of online.csv and rate.csv: the
# requests of the windows perf_analyzer kept, the time they spanned, their percentiles
TAIL_REQUESTS, TAIL_SECONDS = "Requests", "Measured (s)"
EVERY = {f"p{q:g}": f"p{q:g} every request (ms)" for q in PERCENTILES}
P99_CI = ["p99 ci95 low (ms)", "p99 ci95 high (ms)"]
TAIL_COLUMNS = [TAIL_REQUESTS, TAIL_SECONDS, *EVERY.values(), *P99_CI]


def tail_row(requests: int, seconds: float, percentiles_ms: dict) -> dict:
    """A level's TAIL_COLUMNS: its requests, their span and tail.percentiles' figures."""
    return {TAIL_REQUESTS: requests, TAIL_SECONDS: seconds,
            **{EVERY[q]: v["value"] for q, v in percentiles_ms.items()},
            P99_CI[0]: percentiles_ms["p99"]["ci95"][0],
            P99_CI[1]: percentiles_ms["p99"]["ci95"][1]}

# rate.csv (the rate scenario, deploybench.sweeps.open_loop): offered, the setting; sent, what
# perf_analyzer's schedule (a seeded Poisson draw) sent over its kept windows; achieved,
# what was answered, from the first send to the last answer
OFFERED, SENT, ACHIEVED = "Offered (req/s)", "Sent (req/s)", "Achieved (req/s)"
WITHIN = "Within budget"
RATE_COLUMNS = ["Batch", "Distribution", OFFERED, SENT, ACHIEVED, THROUGHPUT, *TAIL_COLUMNS, WITHIN,
                *LATENCY_COLUMNS, SHARED_MEMORY, SERVED_BY, STABLE, WINDOW_SPREAD]

# native.csv: host arrays in and out (what the python backend's runner does), and for a
# torch runner on a GPU the same with inputs and outputs already on the device
DEVICE_THROUGHPUT = f"device-resident {THROUGHPUT}"
NATIVE_COLUMNS = ["Batch", THROUGHPUT, "median latency (ms)", "iterations",
                  DEVICE_THROUGHPUT, "device-resident median latency (ms)"]

# Telemetry (deploybench.measurement.telemetry) over the time a row of offline.csv, online.csv,
# floor.csv or native.csv was measured, after the row's own columns: CPU (% of one core)
# and resident memory of the process tree that served it (the server and its python-backend
# stubs; the step itself for native), and where a GPU was measured what it did. Energy per
# inference is the mean power over the throughput (mJ: the tables keep 4 decimals).
CPU_MEAN, CPU_MAX = "process CPU mean (%)", "process CPU max (%)"
RSS_MEAN, RSS_MAX = "process RSS mean (MiB)", "process RSS max (MiB)"
PROCESS_TELEMETRY = [CPU_MEAN, CPU_MAX, RSS_MEAN, RSS_MAX]
GPU_UTIL_MEAN, GPU_UTIL_MAX = "GPU utilization mean (%)", "GPU utilization max (%)"
GPU_MEMORY_MAX = "GPU memory used max (MiB)"
POWER_MEAN, SM_CLOCK_MEAN = "GPU power mean (W)", "SM clock mean (MHz)"
ENERGY_PER_INFERENCE = "energy per inference (mJ)"
INFERENCES_PER_WATT = f"{THROUGHPUT} per W"
THROTTLE_REASONS = "clock event reasons"  # NVML's throttle reasons seen, space-separated
GPU_TELEMETRY = [GPU_UTIL_MEAN, GPU_UTIL_MAX, GPU_MEMORY_MAX, POWER_MEAN, SM_CLOCK_MEAN,
                 ENERGY_PER_INFERENCE, INFERENCES_PER_WATT, THROTTLE_REASONS]
TELEMETRY_COLUMNS = PROCESS_TELEMETRY + GPU_TELEMETRY


def measured_columns(table: pd.DataFrame) -> pd.DataFrame:
    """A table without its telemetry columns: the measurement as the reference documents
    tabulate it."""
    return table.drop(columns=[c for c in TELEMETRY_COLUMNS if c in table])


# conversion_check.csv: the converted model against the source model, per output.
CHECK_COLUMNS = ["output", "samples", "max_abs_error", "max_rel_error", "mean_abs_error",
                 "atol", "rtol", "passed"]

# accuracy.csv: metrics of the served outputs (`triton`) and of the source model's
# (`source`); deviations of the served outputs from the source model's, with a limit; where
# the model declares a metric tolerance for the precision, each metric's move from the
# source model's (`metric_change:<metric>`), with a limit.
ACCURACY_COLUMNS = ["name", "kind", "triton", "source", "limit", "passed"]
# The kinds of row a configuration must pass to be measured and shipped
GATED_KINDS = ("deviation", "metric_change")


def read_perf(csv: Path) -> pd.DataFrame:
    """An offline, online or floor table; one measured before the shared-memory column
    existed used system shared memory offline (the only mode then), none online; one
    measured before the component sum was kept gets it from its components; one measured
    before the served-by column was served by the python backend (the only one then); one
    measured before the stability column settled on every row (an unsettled level ended its
    step then), its window spread unknown."""
    table = pd.read_csv(csv)
    if STABLE not in table:
        table[STABLE] = True
    if WINDOW_SPREAD not in table:
        table[WINDOW_SPREAD] = float("nan")
    if SERVED_BY not in table:
        table[SERVED_BY] = "python"
    if SHARED_MEMORY not in table:
        table[SHARED_MEMORY] = "none" if Path(csv).stem == "online" else "system"
    if COMPONENT_SUM not in table:
        table[COMPONENT_SUM] = table[COMPONENTS].sum(axis=1)
    return table


def reference_rows(reference_csv: Path, document: str, where: dict,
                   scenario: str | None = None) -> pd.DataFrame:
    """A reference document's published rows (of one scenario), narrowed by `where`:
    column -> value."""
    ref = pd.read_csv(reference_csv, low_memory=False)
    keep = ref["document"] == document
    if scenario:
        keep &= ref["scenario"] == scenario
    for column, value in where.items():
        if isinstance(value, (int, float)):  # 128 matches the table's 128.0
            keep &= pd.to_numeric(ref[column], errors="coerce") == value
        else:
            keep &= ref[column].astype(str) == str(value)
    return ref[keep]


# What tells the published tables of one document apart, GPU aside.
REFERENCE_SERIES = ["backend", "backend_accelerator", "precision"]


def reference_series(backend, accelerator, precision) -> str:
    """A published table's name as reference.pairs in the model configs has it: backend,
    its accelerator where it has one beyond CUDA, precision (e.g. 'ONNX Runtime + NVIDIA
    TensorRT FP16')."""
    accelerator = str(accelerator)
    plain = accelerator in ("nan", "-", "none", "CUDA")
    return f"{backend if plain else f'{backend} + {accelerator}'} {precision}"


def published_gpus(rows: pd.DataFrame) -> dict[str, list[str]]:
    """Each published table of `rows` (by reference_series) -> the GPU keys it was
    measured on."""
    return {reference_series(*series): sorted(set(keys)) for series, keys in
            rows.groupby(REFERENCE_SERIES, dropna=False)["gpu_key"]}


def require_passed(check_csv: Path) -> None:
    """Refuse to deploy a conversion whose check failed."""
    table = pd.read_csv(check_csv)
    failed = table[~table["passed"].astype(bool)]
    if len(failed):
        worst = ", ".join(
            f"{r.output}: max abs {r.max_abs_error:.3g} (atol {r.atol}), "
            f"max rel {r.max_rel_error:.3g} (rtol {r.rtol})"
            for r in failed.itertuples()
        )
        raise ValueError(f"conversion check {check_csv} failed for {worst}")


def require_accurate(accuracy_csv: Path | list) -> None:
    """Refuse to benchmark a deployment whose served outputs deviate beyond the limits
    (none to check: an empty list, a configuration without an accuracy step)."""
    if not accuracy_csv:
        return
    failed = accuracy_failures(pd.read_csv(accuracy_csv))
    if failed:
        raise ValueError(f"accuracy check {accuracy_csv} failed ({'; '.join(failed)}); not "
                         "benchmarking")


def accuracy_failures(table: pd.DataFrame) -> list[str]:
    """An accuracy table's gated rows that failed, each with its numbers."""
    gated = table[table["kind"].isin(GATED_KINDS) & (table["passed"].astype(str) != "True")]
    metrics = table[table["kind"] == "metric"].set_index("name")
    said = []
    for row in gated.itertuples():
        if row.kind != "metric_change":
            said.append(f"{row.name} = {row.triton:.3g} > {row.limit:.3g}")
            continue
        name = row.name.split(":", 1)[1]
        served, source = metrics.loc[name, "triton"], metrics.loc[name, "source"]
        said.append(f"{name} {served:.4g} served against {source:.4g} from the source model: "
                    f"moved {row.triton:.3g} > {row.limit:.3g}")
    return said
