"""Model plug-ins: `deploybench.models.<plugin>` packages with one API.

A plug-in provides:
  build_model(hparams, checkpoint, seed) -> torch.nn.Module   (eval, FP32, CPU;
      forward(*inputs) in the order of the model config's inputs; one tensor or a tuple
      in the order of its outputs)
  generate_dataset(hparams, out_dir, seed, **size)  (a small dataset in the real format)
  load_split(hparams, data_dir, split, max_samples) -> (inputs, targets)  (lists of arrays)
  evaluate(hparams, predictions, targets) -> {metric: value}
and may provide:
  perf_inputs(hparams, inputs) -> inputs  (what perf_analyzer sends, from the evaluation
      inputs, where the reference prepared its perf input otherwise; default: the first
      32 evaluation samples)
  own_export(hparams, format) -> path or None  (a file that is the export of `format` as it
      is, copied instead of exporting the built model: a user's own model file, the
      `artifact` plug-in that `deploybench add-model` configures)
Tensor names live only in the model config; plug-ins work with ordered lists (the
`artifact` plug-in reads its inputs' specs from its hparams, an alias of the config's).
"""

from __future__ import annotations

import importlib
import pickle
import zipfile
from pathlib import Path
from types import ModuleType

REQUIRED = ("build_model", "generate_dataset", "load_split", "evaluate")


EXTRAS = {"tensorflow": "tf", "keras": "tf", "tf2onnx": "tf"}  # package -> extra of it


def load(name: str) -> ModuleType:
    try:
        module = importlib.import_module(f"deploybench.models.{name}")
    except ModuleNotFoundError as err:
        if err.name not in EXTRAS:
            raise
        raise ModuleNotFoundError(
            f"model plug-in '{name}' needs the '{err.name}' package, which is not installed "
            f"here: bash scripts/setup.sh {EXTRAS[err.name]} (or pip install -e "
            f"'.[{EXTRAS[err.name]}]')", name=err.name) from err
    missing = [f for f in REQUIRED if not hasattr(module, f)]
    if missing:
        raise TypeError(f"model plug-in '{name}' lacks {', '.join(missing)}")
    return module


def sources(name: str) -> list[Path]:
    """The plug-in's source files (its package, models/<name>/): a change to any of them
    re-runs the pipeline from the weights."""
    return sorted((Path(__file__).with_name("models") / name).glob("*.py"))


def check_zip(path: Path, what: str) -> None:
    """A zip checkpoint (torch.save's format) whose every entry passes its CRC check:
    torch reads tensor bytes without checking them, so a damaged copy would load as other
    weights. A legacy (non-zip) file has no checksums to check."""
    if not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{what} checkpoint '{path}' is a damaged zip file: {err}") from err
    if bad is not None:
        raise ValueError(f"{what} checkpoint '{path}' is corrupt: its entry '{bad}' fails "
                         "the zip CRC check (a damaged or partial copy); nothing was loaded")


def read_torch_file(path: Path, what: str, stand_ins: dict[str, type] | None = None):
    """A checkpoint file of tensors and plain containers, with one message for a missing
    or unreadable file. A zip file's checksums are checked first (check_zip). torch's
    weights-only unpickler reads it (legacy and zip files alike): no callable named in
    the file runs, except the classes of `stand_ins` (dotted name in the file -> a class
    of ours that only holds attributes)."""
    import torch

    if not path.is_file():
        raise FileNotFoundError(f"{what} checkpoint '{path}' does not exist")
    check_zip(path, what)
    allowed = [(cls, name) for name, cls in (stand_ins or {}).items()]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # any unreadable or refused file: the same message
        raise ValueError(f"{what} checkpoint '{path}' is not a readable torch file of "
                         f"tensors and plain values (nothing else is loaded): {err}") from err


# What a pickle of numpy arrays names: numpy's array and dtype rebuilders (numpy 1 and 2).
_NUMPY_GLOBALS = {("numpy.core.multiarray", "_reconstruct"),
                  ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy", "ndarray"), ("numpy", "dtype")}


class _NumpyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused global {module}.{name}: only numpy arrays "
                                     "in plain containers are read")


def read_numpy_pickle(path: Path, what: str):
    """A pickle of numpy arrays in plain containers (lists, tuples, dicts), as DLE's
    preprocessing writes its data: numpy's array rebuilders are the only callables a
    pickle here may name, so loading one never runs code."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} file '{path}' does not exist")
    try:
        with open(path, "rb") as f:
            return _NumpyUnpickler(f).load()
    except Exception as err:  # a refused global, or not a pickle at all
        raise ValueError(f"{what} file '{path}' is not a pickle of numpy arrays: {err}") from err


class Seeds:
    """Distinct, reproducible initializer seeds derived from one model seed (Keras
    plug-ins give each initializer its own)."""

    def __init__(self, seed: int):
        self.base = int(seed) * 100_003
        self.count = 0

    def __call__(self) -> int:
        self.count += 1
        return (self.base + self.count) % (2 ** 31 - 1)


def load_keras_weights(model, checkpoint: str | None, what: str) -> None:
    """A Keras weights file (`model.save_weights`, *.weights.h5) into a built model, with
    one message for a missing file and one for any file that is not this model's."""
    if checkpoint is None:
        return
    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"{what} checkpoint '{path}' does not exist")
    try:
        model.load_weights(str(path))
    except Exception as err:  # wrong suffix, not HDF5, or other shapes: one message
        raise ValueError(f"{what} checkpoint '{path}' is not a Keras weights file "
                         f"(*.weights.h5) of this configuration: {err}") from err


def seeded_keras(build, hparams: dict, seed: int, example: list, checkpoint: str | None,
                 what: str):
    """A Keras model `build(hparams, seed)` with seeded initial weights (same seed: same
    weights), created by a first call on `example` inputs, then those of the Keras weights
    file `checkpoint` where one is named (load_keras_weights)."""
    import keras

    keras.utils.set_random_seed(seed)
    model = build(hparams, seed)
    model(example)
    load_keras_weights(model, checkpoint, what)
    return model


def categorical_dtype(cardinality: int):
    """DLE's get_categorical_feature_type: the ids of a feature of `cardinality` values
    as int8, int16 or int32, the smallest that holds them (a recommender's data)."""
    import numpy as np

    for dtype in (np.int8, np.int16, np.int32):
        if cardinality < np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ValueError(f"categorical cardinality {cardinality} is too big for int32")

