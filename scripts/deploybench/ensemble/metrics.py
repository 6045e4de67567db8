"""The sparse model's lookup and cache-hit counters, read from Triton's metrics."""

from __future__ import annotations

import re

_METRIC = re.compile(r'^deploybench_embedding_(lookups|cache_hits)_total\{([^}]*)\}\s+(\S+)',
                     re.M)


def cache_counters(metrics_text: str) -> dict | None:
    """Lookups and cache hits per table from Triton's metrics (Prometheus text), with
    the hit rate; None when the server exports none (no python sparse model)."""
    per_table: dict[int, dict[str, int]] = {}
    for kind, labels, value in _METRIC.findall(metrics_text):
        table = int(dict(re.findall(r'(\w+)="([^"]*)"', labels))["table"])
        per_table.setdefault(table, {"lookups": 0, "cache_hits": 0})[kind] = int(float(value))
    if not per_table:
        return None
    lookups = sum(t["lookups"] for t in per_table.values())
    hits = sum(t["cache_hits"] for t in per_table.values())
    tables = [per_table[i] for i in sorted(per_table)]
    return {"lookups": lookups, "cache_hits": hits,
            "hit_rate": hits / lookups if lookups else None,
            "per_table_hit_rate": [t["cache_hits"] / t["lookups"] if t["lookups"] else None
                                   for t in tables]}
