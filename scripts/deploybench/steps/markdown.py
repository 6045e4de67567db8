"""Tables as the reports show them: Markdown, numbers to three significant digits."""

from __future__ import annotations

import pandas as pd


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
