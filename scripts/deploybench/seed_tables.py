"""Parse the published result tables of the seed documents ("Deploying X on Triton").

The documents are plain text with one table cell per line: a section title such as
"Offline: NVIDIA A30, NVIDIA TensorRT with FP16, Dataset: electricity", then
"Our results were obtained using the following configuration:", parameter name/value
pairs up to "Results Table", the column headers, and the values row by row.

    python -m deploybench.seed_tables ../shared/seeds/002_86a4b5901d69b16e.txt OUT.csv
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

INTRO = "Our results were obtained using the following configuration:"
GPU_KEYS = {"A30": "a30", "A40": "a40", "A100": "a100", "V100": "v100", "T4": "t4",
            "H100": "h100"}


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _gpu_key(gpu: str) -> str:
    return next((k for name, k in GPU_KEYS.items() if name in gpu), gpu)


def parse(path: str | Path) -> pd.DataFrame:
    lines = [line.strip() for line in Path(path).read_text().splitlines()]
    rows = []
    for i, line in enumerate(lines):
        if line != INTRO or not re.match(r"^(Offline|Online):", lines[i - 1]):
            continue
        section = lines[i - 1]
        j = i + 1
        params = {}
        if lines[j] == "Parameter Name":
            j += 2
        while lines[j] != "Results Table":
            params[lines[j]] = lines[j + 1]
            j += 2
        j += 1
        headers = []
        while _number(lines[j]) is None:
            headers.append(lines[j])
            j += 1
        values = []
        while j < len(lines) and _number(lines[j]) is not None:
            values.append(_number(lines[j]))
            j += 1
        if not headers or len(values) % len(headers):
            raise ValueError(f"{Path(path).name}: section '{section}' has {len(values)} "
                             f"values for {len(headers)} columns")
        for k in range(0, len(values), len(headers)):
            row = {"document": Path(path).name, "scenario": section.split(":")[0].lower(),
                   "section": section, "gpu_key": _gpu_key(params.get("GPU", ""))}
            row |= {name.lower().replace(" ", "_"): value for name, value in params.items()}
            row |= dict(zip(headers, values[k : k + len(headers)]))
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str]) -> None:
    tables = [parse(p) for p in argv[:-1]]
    pd.concat(tables).to_csv(argv[-1], index=False)


if __name__ == "__main__":
    main(sys.argv[1:])
