"""Conversion check: the converted model against the source model on real batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import atomic, device, runtimes, source
from .tensors import batched

COLUMNS = ["output", "samples", "max_abs_error", "max_rel_error", "mean_abs_error",
           "atol", "rtol", "passed"]


def compare(name: str, got: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> dict:
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    rel = err / np.maximum(np.abs(ref), np.finfo(np.float32).tiny)
    return {
        "output": name, "samples": len(ref),
        "max_abs_error": float(err.max()), "max_rel_error": float(rel.max()),
        "mean_abs_error": float(err.mean()), "atol": atol, "rtol": rtol,
        # numpy.allclose's rule, element-wise: |got - ref| <= atol + rtol * |ref|
        "passed": bool(np.all(err <= atol + rtol * np.abs(ref)) and np.isfinite(got).all()),
    }


def tolerance(model: dict, precision: str, output: str) -> dict:
    """{atol, rtol} of one output: the precision's, with the output's overrides."""
    tol = model["conversion"]["tolerance"][precision]
    return {"atol": tol["atol"], "rtol": tol["rtol"], **tol.get("outputs", {}).get(output, {})}


def run_check(run: dict, converted: Path, eval_npz: Path, out: Path) -> pd.DataFrame:
    model = run["model"]
    device.check(run["gpu"], run["allow_gpu_mismatch"])
    inputs, reference, _ = source.load_eval(model, eval_npz)
    infer = runtimes.load(converted, run)
    outputs = batched(infer, inputs, model["conversion"]["batch_size"])
    rows = []
    for spec, got, ref in zip(model["outputs"], outputs, reference):
        tol = tolerance(model, run["precision"], spec["name"])
        rows.append(compare(spec["name"], got, ref, tol["atol"], tol["rtol"]))
    table = pd.DataFrame(rows, columns=COLUMNS)
    with atomic.output(out) as tmp:
        table.to_csv(tmp, index=False)
    return table


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
