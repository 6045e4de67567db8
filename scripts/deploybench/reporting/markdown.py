"""Tables as the reports show them (Markdown, numbers to three significant digits), and
perf_analyzer's settings in the reports' words."""

from __future__ import annotations

import pandas as pd

from ..settings.run_facts import DEFAULT_WARMUP_LEVELS

# perf_analyzer's own stability criterion, which every reference document kept
PERF_ANALYZER_STABILITY = 10


def markdown_table(table: pd.DataFrame) -> str:
    def cell(v):
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return ""
        if isinstance(v, float):
            return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3g}" if v else "0.0"
        return str(v)

    head = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---:" for _ in table.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(False)]
    return "\n".join([head, rule, *body])


def batches_formed(levels: list[dict], key: str, name: str) -> str:
    """What Triton's dynamic batcher formed at each level: its executions by batch size
    (the levels' `executions_by_batch`, beside their `key` shown as `name`), a row a level
    and a column a batch size, with the mean batch an execution ran."""
    rows = []
    for level in levels:
        formed = {int(b): n for b, n in level.get("executions_by_batch", {}).items()}
        total = sum(formed.values())
        mean = sum(b * n for b, n in formed.items()) / total if total else float("nan")
        rows.append({name: level[key], "mean batch": mean,
                     **{f"batch {b}": n for b, n in sorted(formed.items())}})
    table = pd.DataFrame(rows)
    columns = sorted((c for c in table if c.startswith("batch ")), key=lambda c: int(c[6:]))
    table = table[[name, "mean batch", *columns]].fillna(0)
    return markdown_table(table.astype({c: int for c in columns}))


def shared_memory(ran: dict) -> str:
    """perf_analyzer's shared-memory modes as a scenario's JSON recorded them (a list; one
    mode as a string in earlier ones)."""
    modes = ran.get("shared_memory") or ["none"]
    return " and ".join(modes if isinstance(modes, list) else [modes])


def windows(ran: dict) -> str:
    """perf_analyzer's windows as a scenario's JSON recorded them."""
    return (f"{ran['measurement_interval_ms'] / 1000:g} s windows"
            if ran.get("measurement_mode") == "time_windows"
            else f"{ran['measurement_request_count']} requests a window")


def warm_up(ran: dict) -> str:
    """The warm-up as a scenario's JSON recorded it: its windows (`warmup_windows` times the
    scenario's; how many, where recorded: `warmup_trials`, since 2026-11-28) and levels
    (batch, concurrency; max and max/2 of the sweep's)."""
    scale = ran.get("warmup_windows", 0)
    if not scale:
        return "none"
    window = (f"{ran['measurement_interval_ms'] * scale / 1000:g} s"
              if ran.get("measurement_mode") == "time_windows"
              else f"{ran['measurement_request_count'] * scale} requests")
    trials = ran.get("warmup_trials")
    levels = ran.get("warmup_levels") or DEFAULT_WARMUP_LEVELS
    return ((f"{trials} windows of {window}" if trials else f"windows of {window}") + " at "
            + ", ".join(f"batch {b} x concurrency {c}" for b, c in levels))
