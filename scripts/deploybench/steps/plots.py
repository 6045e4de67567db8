"""The reference documents' plots: throughput and latency vs batch (offline), and latency
vs concurrency with the latency components stacked (online)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .. import atomic  # noqa: E402
from ..tables import COMPONENTS, SHARED_MEMORY, THROUGHPUT, read_perf  # noqa: E402


def _save(fig, out: Path) -> None:
    with atomic.output(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def plots(spec: dict, offline: Path, online: Path, offline_throughput: Path,
          offline_latency: Path, online_latency: Path) -> None:
    title = f"{spec['model']} {spec['gpu']} {spec['backend']} {spec['precision']}"
    offline_plots(offline, title, offline_throughput, offline_latency)
    online_plot(online, title, online_latency)


def offline_plots(csv: Path, title: str, throughput_png: Path, latency_png: Path) -> None:
    """Bars per batch (side by side per shared-memory mode), latencies per mode."""
    table = read_perf(csv)
    modes = list(dict.fromkeys(table[SHARED_MEMORY]))
    batches = list(dict.fromkeys(table["Batch"]))
    width = 0.8 / len(modes)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, mode in enumerate(modes):
        rows = table[table[SHARED_MEMORY] == mode].set_index("Batch").reindex(batches)
        ax.bar([x + i * width for x in range(len(batches))], rows[THROUGHPUT], width,
               label=f"{mode} shared memory", color=("#76b900", "#1a6fb0", "#999")[i % 3])
    ax.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(batches))],
                  [str(b) for b in batches])
    ax.set(xlabel="Batch", ylabel="Inferences/second", title=f"Throughput vs batch: {title}")
    ax.legend(fontsize="small")
    _save(fig, throughput_png)

    fig, ax = plt.subplots(figsize=(7, 4))
    for mode in modes:
        rows = table[table[SHARED_MEMORY] == mode]
        suffix = f" ({mode})" if len(modes) > 1 else ""
        for col in ("avg latency (ms)", "p90 latency (ms)", "p95 latency (ms)",
                    "p99 latency (ms)"):
            ax.plot(rows["Batch"].astype(str), rows[col], marker="o", label=col + suffix)
    ax.set(xlabel="Batch", ylabel="Latency (ms)", title=f"Latency vs batch: {title}")
    ax.legend(fontsize="small")
    _save(fig, latency_png)


def online_plot(csv: Path, title: str, latency_png: Path) -> None:
    table = pd.read_csv(csv).sort_values("Concurrency")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bottom = None
    x = table["Concurrency"].astype(str)
    for col in COMPONENTS:
        ax.bar(x, table[col], bottom=bottom, label=col.replace(" (ms)", ""))
        bottom = table[col] if bottom is None else bottom + table[col]
    ax.set(xlabel="Concurrency", ylabel="Latency (ms)",
           title=f"Latency components vs concurrency: {title}")
    ax.legend(fontsize="small")
    _save(fig, latency_png)
