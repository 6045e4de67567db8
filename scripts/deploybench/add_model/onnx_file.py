"""An ONNX file's tensors, read from its graph (a protobuf: no code runs)."""

from __future__ import annotations

from pathlib import Path

from .base import Refused, batched

ONNX_TYPES = {1: "FP32", 10: "FP16", 11: "FP64", 6: "INT32", 7: "INT64", 5: "INT16",
              3: "INT8", 2: "UINT8", 9: "BOOL"}


def tensors(path: Path) -> tuple[list[dict], list[dict]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name for t in graph.initializer}

    def spec(value, what):
        kind = value.type.tensor_type
        if kind.elem_type not in ONNX_TYPES:
            raise Refused(f"{what} '{value.name}' has ONNX element type {kind.elem_type}, "
                          f"which Triton's configs here do not map; valid: "
                          f"{', '.join(ONNX_TYPES.values())}")
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in kind.shape.dim]
        return {"name": value.name, "dtype": ONNX_TYPES[kind.elem_type],
                "dims": batched(value.name, dims, what)}
    return ([spec(v, "input") for v in graph.input if v.name not in weights],
            [spec(v, "output") for v in graph.output])
