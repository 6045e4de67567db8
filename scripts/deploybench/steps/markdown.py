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
