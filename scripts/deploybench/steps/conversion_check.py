"""Conversion check: the converted model against the source model on real batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts
from ..records import atomic
from ..records.tables import CHECK_COLUMNS
from ..source import model as source_model
from ..tensors import batched, check_arrays


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


def conversion_check(spec: dict, converted: Path, eval_set: Path, out: Path) -> None:
    model = spec["model"]
    inputs, reference, _ = source_model.load_eval(model, eval_set)
    infer = artifacts.of(spec).runner(converted, spec)
    outputs = batched(infer, inputs, model["conversion"]["batch_size"])
    # what the serving code gives, checked against what the model config declares
    check_arrays(model["outputs"], outputs, "the converted model's outputs")
    rows = []
    for tensor, got, ref in zip(model["outputs"], outputs, reference):
        tol = tolerance(model, spec["precision"], tensor["name"])
        rows.append(compare(tensor["name"], got, ref, tol["atol"], tol["rtol"]))
    table = pd.DataFrame(rows, columns=CHECK_COLUMNS)
    with atomic.output(out) as tmp:
        table.to_csv(tmp, index=False)
    print(table.to_string(index=False))
