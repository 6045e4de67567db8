"""A TensorFlow SavedModel's tensors, read from its `serving_default` signature in
saved_model.pb (a protobuf, parsed as data: nothing of the folder is loaded or run)."""

from __future__ import annotations

from pathlib import Path

from .base import TRITON_OF_NUMPY, Refused, batched

SIGNATURE = "serving_default"  # the one Triton's tensorflow backend serves too
SERVE_TAG = "serve"
FILES = ("saved_model.pb", "saved_model.pbtxt")
HOW = ("save it with tf.saved_model.save(module, path, signatures={'serving_default': f}), "
       "f a tf.function whose input_signature has a dynamic batch (TensorSpec([None, ...]))")


def is_savedmodel(path: Path) -> bool:
    return any((path / name).is_file() for name in FILES)


def _meta_graphs(path: Path) -> list:
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    binary = path / FILES[0]
    if binary.is_file():
        saved.ParseFromString(binary.read_bytes())
    else:
        text_format.Parse((path / FILES[1]).read_text(), saved)
    return list(saved.meta_graphs)


def _spec(key: str, info, what: str) -> dict:
    from tensorflow.core.framework import types_pb2

    if info.WhichOneof("encoding") != "name":
        raise Refused(f"{what} '{key}' of signature '{SIGNATURE}' is a composite (sparse or "
                      "ragged) tensor; add-model takes dense tensors")
    dtype = types_pb2.DataType.Name(info.dtype).removeprefix("DT_").lower()
    dtype = {"float": "float32", "double": "float64", "half": "float16"}.get(dtype, dtype)
    if dtype not in TRITON_OF_NUMPY:
        raise Refused(f"{what} '{key}' of signature '{SIGNATURE}' is {dtype}; valid: "
                      f"{', '.join(TRITON_OF_NUMPY)}")
    if info.tensor_shape.unknown_rank:
        raise Refused(f"{what} '{key}' of signature '{SIGNATURE}' has no known rank; {HOW}")
    dims = [d.size for d in info.tensor_shape.dim]
    return {"name": key, "dtype": TRITON_OF_NUMPY[dtype], "dims": batched(key, dims, what)}


def tensors(path: Path) -> tuple[list[dict], list[dict]]:
    """The serving signature's inputs and outputs, each in the order of their names (a
    signature maps names to tensors: it is called by name)."""
    graphs = _meta_graphs(path)
    served = [g for g in graphs if SERVE_TAG in g.meta_info_def.tags]
    if not served:
        tags = [list(g.meta_info_def.tags) for g in graphs]
        raise Refused(f"SavedModel '{path}' has no graph tagged '{SERVE_TAG}' (its tags: "
                      f"{tags}); {HOW}")
    signatures = served[0].signature_def
    if SIGNATURE not in signatures:
        found = sorted(k for k in signatures if not k.startswith("__"))
        raise Refused(f"SavedModel '{path}' has no serving signature '{SIGNATURE}' (its "
                      f"signatures: {', '.join(found) or 'none'}); {HOW}")
    signature = signatures[SIGNATURE]
    return ([_spec(k, signature.inputs[k], "input") for k in sorted(signature.inputs)],
            [_spec(k, signature.outputs[k], "output") for k in sorted(signature.outputs)])
