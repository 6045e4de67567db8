"""Tensor specs of the model config (name, Triton dtype, dims without batch)."""

from __future__ import annotations

import numpy as np

from .runners.base import NUMPY_DTYPES


def numpy_dtype(triton_dtype: str):
    return NUMPY_DTYPES[triton_dtype]


def batched(infer, inputs: list[np.ndarray], batch_size: int) -> list[np.ndarray]:
    """Run `infer` (list of input arrays -> list of output arrays) over `inputs` in
    batches of `batch_size` and concatenate the outputs."""
    parts = [infer([a[start : start + batch_size] for a in inputs])
             for start in range(0, len(inputs[0]), batch_size)]
    return [np.concatenate(p) for p in zip(*parts)]


def check_arrays(specs: list[dict], arrays: list[np.ndarray], what: str) -> None:
    """Refuse arrays whose count, dtype or per-sample shape differ from the config."""
    if len(specs) != len(arrays):
        raise ValueError(f"{what}: {len(arrays)} tensors, the model config lists {len(specs)}")
    for spec, array in zip(specs, arrays):
        want_shape = tuple(spec["dims"])
        shape_ok = len(array.shape) == len(want_shape) + 1 and all(
            w in (-1, h) for w, h in zip(want_shape, array.shape[1:])
        )
        if array.dtype != numpy_dtype(spec["dtype"]) or not shape_ok:
            raise ValueError(
                f"{what}: tensor '{spec['name']}' is {array.dtype}{list(array.shape[1:])} per "
                f"sample, the model config says {spec['dtype']}{list(want_shape)}"
            )
