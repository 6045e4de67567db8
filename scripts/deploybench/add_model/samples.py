"""The samples of a user's model: integer inputs' ranges asked for, values generated from
the tensor specs, or the user's own checked against them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.artifact import input_arrays
from ..tensors import check_arrays, numpy_dtype
from .base import INTEGERS, Refused


def parse_ranges(given: list[str]) -> dict[str, list[int]]:
    """--range NAME=LOW:HIGH (integers drawn in [LOW, HIGH))."""
    ranges = {}
    for text in given:
        name, _, bounds = text.partition("=")
        low, _, high = bounds.partition(":")
        try:
            ranges[name] = [int(low), int(high)]
        except ValueError as err:
            raise Refused(f"--range '{text}' is not NAME=LOW:HIGH (e.g. ids=0:1000)") from err
        if ranges[name][0] >= ranges[name][1]:
            raise Refused(f"--range '{text}': LOW must be below HIGH")
    return ranges


def generate_arrays(inputs: list[dict], ranges: dict, samples: int, seed: int) -> dict:
    """Values for each input from its spec: floats standard normal, integers uniform in the
    input's range (the file cannot tell an id's bound), booleans either; a dynamic
    dimension of 4."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for spec in inputs:
        shape = (samples, *[4 if d < 0 else d for d in spec["dims"]])
        dtype = numpy_dtype(spec["dtype"])
        if np.issubdtype(dtype, np.floating):
            arrays[spec["name"]] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            arrays[spec["name"]] = rng.integers(0, 2, shape).astype(bool)
        else:
            low, high = ranges[spec["name"]]
            arrays[spec["name"]] = rng.integers(low, high, shape).astype(dtype)
    return arrays


def integer_ranges(specs: list[dict], ranges: dict, data: Path | None) -> dict:
    """Every integer input's range of generated values: the user's; [0, 2) where the user's
    samples are used; refused where generated samples need one the user did not give."""
    needed = [s["name"] for s in specs if s["dtype"] in INTEGERS and s["name"] not in ranges]
    if needed and data is None:
        raise Refused(f"integer input(s) {', '.join(needed)}: the file cannot tell their "
                      "values' range (an id's bound); give each as --range NAME=LOW:HIGH, or "
                      "your own samples as --data FILE.npz")
    return {**{n: [0, 2] for n in needed}, **ranges}


def check_data(path: Path, inputs: list[dict]) -> None:
    """A user's .npz: an array per input, of its dtype and per-sample shape."""
    try:
        check_arrays(inputs, input_arrays(path, inputs), f"data file '{path}'")
    except ValueError as err:
        raise Refused(str(err)) from err
