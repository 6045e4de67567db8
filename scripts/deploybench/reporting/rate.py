"""The rate scenario as the configuration report shows it: the highest rate within the
budget in one sentence (the rate step prints it too), the levels, the plot and the batches
Triton formed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import formats
from ..records.tables import LATENCY_COLUMNS, OFFERED, P99_CI, TAIL_REQUESTS
from ..records.tail import UNBOUNDED, interval_text
from .markdown import batches_formed, markdown_table

# The configuration report's rate section (one paragraph a line)
SECTION = (
    "Open loop: requests of batch {batch} arriving at each offered rate ({distribution} "
    "arrivals){peak}, on the online deployment. The percentiles are every request's of the windows "
    "perf_analyzer kept (at least {min_requests} a level), with 95 % intervals ({unbounded}: too "
    "few requests above the percentile to bound it); "
    "`p99 latency (ms)` is perf_analyzer's own.\n\n"
    "**{verdict}**\n\n"
    "![Latency vs offered rate]({plot})\n\n"
    "{table}\n\n"
    "Executions by the batch size Triton's dynamic batcher formed (preferred sizes "
    "{preferred}, queue delay {delay} µs):\n\n"
    "{formed}\n")


def max_rate_sentence(found: dict, budget: float) -> str:
    """The highest rate within the budget (rate.json's max_rate_within_budget), or why the
    rates measured do not bracket it."""
    low, high = found["bracket"]
    beyond = found["beyond"]
    if low is None:
        return (f"No rate measured kept p99 within {budget:g} ms (the lowest, "
                f"{high:g} requests/s, {beyond}): lower rate.rates.")
    if high is None:
        return (f"Every rate measured kept p99 within {budget:g} ms: the maximum is above "
                f"{low:g} requests/s (p99 {found['p99_ms']:.3g} ms); raise rate.rates.")
    return (f"Maximum rate with p99 within {budget:g} ms: {low:g} requests/s "
            f"({found['throughput']:.5g} inferences/s, p99 {found['p99_ms']:.3g} ms, 95 % interval "
            f"{interval_text(*found['p99_ci95_ms'])}); {high:g} "
            f"requests/s {beyond}.")


def rate_section(run: dict, rate_csv: Path, rate_json: Path, plot: str) -> str:
    """The configuration report's rate section: the maximum rate within the budget, the
    levels, the plot (relative link `plot`) and the batches Triton formed at each level."""
    settings, triton = run["model"]["rate"], run["model"]["triton"]
    result = formats.read(Path(rate_json))
    table = pd.read_csv(rate_csv)
    shown = table.drop(columns=[c for c in LATENCY_COLUMNS if c not in
                                ("avg latency (ms)", "p99 latency (ms)")])
    if P99_CI[1] in shown:  # a measured level's p99 that too few requests bound from above
        shown[P99_CI[1]] = shown[P99_CI[1]].astype(object).where(
            shown[P99_CI[1]].notna() | shown[TAIL_REQUESTS].isna(), UNBOUNDED)
    used = result["settings"]
    peak = (f"; the rates {used['rates_of_peak']} of the online sweep's peak, "
            f"{used['online_peak_requests_per_s']:g} requests/s"
            if "online_peak_requests_per_s" in used else "")
    return SECTION.format(
        batch=settings["batch_size"], distribution=settings["distribution"], peak=peak,
        min_requests=settings["min_requests"], unbounded=UNBOUNDED,
        verdict=max_rate_sentence(result["max_rate_within_budget"], settings["p99_budget_ms"]),
        plot=plot, table=markdown_table(shown), preferred=triton["preferred_batch_sizes"],
        delay=triton["max_queue_delay_us"],
        formed=batches_formed(result["levels"], "offered", OFFERED))
