"""The reference documents' plots: throughput and latency vs batch (offline), and latency
vs concurrency with the latency components stacked (online), latency vs offered rate
(rate); and a model's frontiers: throughput against latency, one line per configuration,
published rows dashed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..records import atomic  # noqa: E402
from ..records.tables import (  # noqa: E402
    ACHIEVED,
    COMPONENTS,
    EVERY,
    OFFERED,
    P99_CI,
    SENT,
    SHARED_MEMORY,
    STABLE,
    THROUGHPUT,
    read_perf,
)


def _save(fig, out: Path) -> None:
    atomic.write_png(fig, out, dpi=110, bbox_inches="tight")
    plt.close(fig)


OPEN_ENDED = "no upper bound (too few requests above it)"


def interval_bars(ax, x, values, intervals, **style) -> None:
    """Points with their 95 % intervals (tail.percentiles' [low, high]); an end no request
    bounds (None, NaN) drawn as no bar, an unbounded upper end marked by a caret above."""
    def gap(a, b):
        return 0.0 if a is None or b is None or a != a or b != b else a - b

    values = list(values)
    low = [gap(v, lo) for v, (lo, _) in zip(values, intervals, strict=True)]
    high = [gap(hi, v) for v, (_, hi) in zip(values, intervals, strict=True)]
    line = ax.errorbar(list(x), values, yerr=[low, high], marker="o", **style)
    open_ended = [(p, v) for p, v, (_, hi) in zip(x, values, intervals, strict=True)
                  if hi is None or hi != hi]
    if open_ended:
        said = OPEN_ENDED in ax.get_legend_handles_labels()[1]
        ax.scatter([p for p, _ in open_ended], [v * 1.25 for _, v in open_ended], marker="^",
                   color=line[0].get_color(), s=18, label=None if said else OPEN_ENDED)


def title(key: dict) -> str:
    """A configuration's plot titles: its key (model, GPU, backend, precision)."""
    return f"{key['model']} {key['gpu']} {key['backend']} {key['precision']}"


def tail_plot(tails: list[dict], formed: list[dict], key: str, title: str,
              out: Path) -> None:
    """Each level's latency distribution from every request (its percentiles, with their
    95 % intervals, one line a level) and the batch sizes Triton formed at each level
    (a column of dots a level, sized by the share of executions at that batch; the line:
    the mean batch an execution ran)."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.get_cmap("viridis")
    for i, level in enumerate(tails):
        names = list(level["percentiles_ms"])
        found = level["percentiles_ms"].values()
        interval_bars(ax, names, [q["value"] for q in found], [q["ci95"] for q in found],
                      capsize=2, color=colors(i / max(len(tails) - 1, 1)),
                      label=f"{key.lower()} {level[key]:g} ({level['requests']} requests)")
    ax.set(xlabel="Percentile", ylabel="Latency (ms), every request", yscale="log",
           title=f"Latency distribution: {title}")
    if tails:
        ax.legend(fontsize="x-small", ncol=2 if len(tails) > 8 else 1)
    else:
        ax.text(0.5, 0.5, "every request's tail not recorded\n(perf.repeats > 1)",
                ha="center", transform=ax.transAxes)
    means = []
    for level in formed:
        counts = {int(b): n for b, n in level["executions_by_batch"].items()}
        total = sum(counts.values()) or 1
        ax2.scatter([level[key]] * len(counts), list(counts),
                    s=[200 * n / total for n in counts.values()], color="#1a6fb0", alpha=0.6)
        means.append((level[key], sum(b * n for b, n in counts.items()) / total))
    if means:
        ax2.plot(*zip(*means), color="#76b900", marker=".", label="mean batch")
        ax2.legend(fontsize="small")
    ax2.set(xlabel=key, ylabel="Batch size Triton executed",
            title="Batches the dynamic batcher formed (dot: share of executions)")
    ax2.set_yscale("log", base=2)
    for axis in (ax.yaxis, ax2.yaxis):  # plain numbers on the log axes
        axis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    _save(fig, out)


def offline_plots(csv: Path, title: str, throughput_png: Path, latency_png: Path) -> None:
    """Bars per batch (side by side per shared-memory mode), latencies per mode."""
    table = read_perf(csv)
    modes = list(dict.fromkeys(table[SHARED_MEMORY]))
    batches = list(dict.fromkeys(table["Batch"]))
    width = 0.8 / len(modes)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, mode in enumerate(modes):
        rows = table[table[SHARED_MEMORY] == mode].set_index("Batch").reindex(batches)
        bars = ax.bar([x + i * width for x in range(len(batches))], rows[THROUGHPUT], width,
                      label=f"{mode} shared memory", color=("#76b900", "#1a6fb0", "#999")[i % 3])
        _hatch_unstable(bars, rows[STABLE])
    ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(batches))],
                  [str(b) for b in batches])
    ax.set(xlabel="Batch", ylabel="Inferences/second",
           title=f"Throughput vs batch: {title}{_unstable_title(table)}")
    ax.legend(fontsize="small")
    _save(fig, throughput_png)

    fig, ax = plt.subplots(figsize=(7, 4))
    for mode in modes:
        rows = table[table[SHARED_MEMORY] == mode]
        suffix = f" ({mode})" if len(modes) > 1 else ""
        for col in ("avg latency (ms)", "p90 latency (ms)", "p95 latency (ms)",
                    "p99 latency (ms)"):
            ax.plot(rows["Batch"].astype(str), rows[col], marker="o",
                    label=col + suffix)
            unstable = ~rows[STABLE].astype(bool)  # hollow, ringed in red
            ax.plot(rows["Batch"].astype(str)[unstable], rows[col][unstable], "o",
                    markerfacecolor="white", markeredgecolor="red", linestyle="none")
    ax.set(xlabel="Batch", ylabel="Latency (ms)",
           title=f"Latency vs batch: {title}{_unstable_title(table)}")
    ax.legend(fontsize="small")
    _save(fig, latency_png)


MAX_BAR_LABELS = 12  # a sweep of 32 levels labels every third bar


def _hatch_unstable(bars, stable: pd.Series) -> None:
    """Hatch (red edge) the bars of levels that did not stabilise (perf.on_unstable)."""
    for bar, ok in zip(bars, stable.tolist()):
        if not (pd.isna(ok) or bool(ok)):
            bar.set_hatch("//")
            bar.set_edgecolor("red")


def _unstable_title(table: pd.DataFrame) -> str:
    count = int((~table[STABLE].astype(bool)).sum())
    return f"\n({count} unstable level{'s' * (count > 1)}: hatched, ringed)" if count else ""


def online_latency_plot(csv: Path, title: str, latency_png: Path) -> None:
    table = read_perf(csv).sort_values("Concurrency")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = None
    x = range(len(table))
    for col in COMPONENTS:
        bars = ax.bar(x, table[col], bottom=bottom, label=col.replace(" (ms)", ""))
        _hatch_unstable(bars, table[STABLE])
        bottom = table[col] if bottom is None else bottom + table[col]
    step = -(-len(table) // MAX_BAR_LABELS)
    ax.set_xticks(list(x)[::step], [str(c) for c in table["Concurrency"]][::step])
    ax.set(xlabel="Concurrency", ylabel="Latency (ms)",
           title=f"Latency components vs concurrency: {title}{_unstable_title(table)}")
    ax.legend(fontsize="small")
    _save(fig, latency_png)


# The latencies a frontier is drawn against, one panel each
FRONTIER_LATENCIES = ("p99 latency (ms)", "avg latency (ms)")
LEGEND_COLUMNS = 3


def pareto_front(latency: pd.Series, throughput: pd.Series) -> pd.Series:
    """Whether each point is on the Pareto front: no other point has at least its
    throughput at no more latency, better in one of them. A sweep's dominated levels
    (more latency for less throughput) are what made its line zig-zag."""
    lat, thr = latency.to_numpy(), throughput.to_numpy()
    dominated = [((lat <= lat[i]) & (thr >= thr[i]) & ((lat < lat[i]) | (thr > thr[i]))).any()
                 for i in range(len(lat))]
    return pd.Series([not d for d in dominated], index=latency.index)


def frontier_plot(lines: list[tuple[str, str, bool, pd.DataFrame]], scenario: str,
                  title: str, out: Path, budget_ms: float | None = None) -> None:
    """Throughput against latency, one row of panels per GPU key: `lines` are (GPU key,
    label, published, rows). Each line joins its Pareto front (pareto_front: a level
    faster for less latency) in latency order, published ones dashed; its dominated points
    are small faint dots. Each point is a batch (offline) or a concurrency (online); the
    legend of a row sits below it, titles are wrapped, so no text overlaps. `budget_ms`: a
    p99 budget, drawn on the p99 panels."""
    gpus = list(dict.fromkeys(gpu for gpu, *_ in lines)) or ["none"]
    fig = plt.figure(figsize=(11, 1 + sum(_row_height(lines, gpu) for gpu in gpus)),
                     layout="constrained")
    rows = fig.subfigures(len(gpus), 1, squeeze=False,
                          height_ratios=[_row_height(lines, gpu) for gpu in gpus])[:, 0]
    for subfig, gpu in zip(rows, gpus):
        _frontier_row(subfig, [line for line in lines if line[0] == gpu], gpu, scenario,
                      budget_ms)
    if not lines:
        rows[0].axes[0].text(0.5, 0.5, "no GPU or CPU measurements yet", ha="center")
    fig.suptitle(textwrap.fill(f"{title}: each line is its Pareto front (more throughput for "
                               "less latency); faint dots: dominated points", 90))
    _save(fig, out)


def _frontier_row(subfig, panel: list, gpu: str, scenario: str,
                  budget_ms: float | None = None) -> None:
    """One GPU key's panels (a latency each) of a frontier plot, its legend below them."""
    colors = plt.get_cmap("tab20")  # up to 20 lines tell apart
    axes = subfig.subplots(1, len(FRONTIER_LATENCIES))
    handles = []
    for ax, latency in zip(axes, FRONTIER_LATENCIES):
        handles = []
        for i, (_, label, published, rows) in enumerate(panel):
            front = pareto_front(rows[latency], rows[THROUGHPUT])
            on = rows[front].sort_values(latency)
            color = colors(i % 20)
            handles += ax.plot(on[latency], on[THROUGHPUT], marker="o", markersize=3,
                               linestyle="--" if published else "-", label=label, color=color)
            off = rows[~front]
            ax.plot(off[latency], off[THROUGHPUT], marker="o", markersize=2,
                    linestyle="none", color=color, alpha=0.35)
        if budget_ms is not None and latency.startswith("p99"):
            handles.append(ax.axvline(budget_ms, color="red", linestyle=":",
                                      label=f"p99 budget {budget_ms:g} ms"))
        ax.set_xscale("log")  # latencies from a batch of one to a full online queue
        ax.set(xlabel=latency, ylabel="Inferences/second")
        ax.set_title(textwrap.fill(f"{gpu}, {scenario}: throughput vs "
                                   f"{latency.split()[0]} latency", 45), fontsize="medium")
        ax.grid(alpha=0.3)
    if handles:
        subfig.legend(handles=handles, loc="outside lower center", fontsize="x-small",
                      ncol=LEGEND_COLUMNS)


def _row_height(lines: list, gpu: str) -> float:
    """A GPU row's height (inches): its panels and its legend below them."""
    entries = sum(1 for line in lines if line[0] == gpu)
    return 3.6 + 0.17 * -(-entries // LEGEND_COLUMNS)


def rate_latency_plot(rate_csv: Path, budget: float, title: str, out: Path) -> None:
    """Every request's p50 and p99 (with its 95 % interval) against the offered rate, the
    budget (p99, ms) as a line, the achieved rate beside the offered one."""
    table = pd.read_csv(rate_csv).sort_values(OFFERED)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    interval_bars(ax, table[OFFERED], table[EVERY["p99"]],
                  table[P99_CI].to_numpy().tolist(), capsize=3, label="p99 (95 % interval)")
    ax.plot(table[OFFERED], table[EVERY["p50"]], marker="o", label="p50")
    ax.axhline(budget, color="red", linestyle="--", label=f"budget {budget:g} ms")
    ax.set(xlabel="Offered rate (requests/s)", ylabel="Latency (ms), every request",
           yscale="log", title=f"Latency vs offered rate: {title}")
    ax.legend(fontsize="small")
    ax2.plot(table[OFFERED], table[SENT], marker="s", label="sent")
    ax2.plot(table[OFFERED], table[ACHIEVED], marker="o", label="answered")
    ax2.plot(table[OFFERED], table[OFFERED], linestyle=":", color="grey", label="offered")
    ax2.set(xlabel="Offered rate (requests/s)", ylabel="Achieved rate (requests/s)",
            title="Achieved vs offered")
    ax2.legend(fontsize="small")
    _save(fig, out)
