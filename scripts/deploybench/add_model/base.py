"""What every reader of a user's model shares: the refusal, the Triton dtypes a config
names, and the batch dimension add-model requires."""

from __future__ import annotations

import numpy as np

from ..runners.base import NUMPY_DTYPES

# A framework's dtype name (numpy's, which torch's and TensorFlow's follow) -> Triton's
TRITON_OF_NUMPY = {np.dtype(t).name: name for name, t in NUMPY_DTYPES.items()}
INTEGERS = {name for name, t in NUMPY_DTYPES.items() if np.issubdtype(t, np.integer)}


class Refused(ValueError):
    """What add-model cannot take, and what would do."""


def batched(name: str, dims: list[int], what: str) -> list[int]:
    """The dims without the batch dimension, which must be dynamic (-1)."""
    if not dims or dims[0] != -1:
        raise Refused(f"{what} '{name}' has shape {dims}: add-model takes models whose first "
                      "dimension is a dynamic batch (export it so: dynamic_axes, Dim)")
    return dims[1:]
