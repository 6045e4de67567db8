"""A torch.export package's tensors, read from its signature (deserialised by torch.export:
no pickle), and a TorchScript file's: its inputs as the user gave them, its outputs from
one run (TorchScript's own loader runs no Python)."""

from __future__ import annotations

from pathlib import Path

from .base import TRITON_OF_NUMPY, Refused, batched
from .samples import generate_arrays


def _torch_spec(name: str, value, what: str) -> dict:
    dims = [int(d) if isinstance(d, int) else -1 for d in value.shape]
    dtype = str(value.dtype).removeprefix("torch.")
    if dtype not in TRITON_OF_NUMPY:
        raise Refused(f"{what} '{name}' is {dtype}; valid: {', '.join(TRITON_OF_NUMPY)}")
    return {"name": name, "dtype": TRITON_OF_NUMPY[dtype], "dims": batched(name, dims, what)}


def pt2_tensors(path: Path) -> tuple[list[dict], list[dict]]:
    import torch

    program = torch.export.load(str(path))
    nodes = {n.name: n for n in program.graph.nodes}
    inputs = [_torch_spec(n, nodes[n].meta["val"], "input")
              for n in program.graph_signature.user_inputs]
    out = next(n for n in program.graph.nodes if n.op == "output").args[0]
    outputs = [_torch_spec(f"output__{i}", node.meta["val"], "output")
               for i, node in enumerate(out)]
    return inputs, outputs


def parse_inputs(given: list[str]) -> list[dict]:
    """--input NAME:DTYPE:D1,D2 (dims after the batch; -1 for a dynamic one)."""
    specs = []
    for text in given:
        parts = text.split(":")
        if len(parts) != 3 or parts[1] not in TRITON_OF_NUMPY.values():
            raise Refused(f"--input '{text}' is not NAME:DTYPE:DIMS with DTYPE one of "
                          f"{', '.join(TRITON_OF_NUMPY.values())} (e.g. x:FP32:4 or "
                          "ids:INT64:3)")
        try:
            dims = [int(d) for d in parts[2].split(",") if d]
        except ValueError as err:
            raise Refused(f"--input '{text}': dims are integers, comma-separated") from err
        specs.append({"name": parts[0], "dtype": parts[1], "dims": dims})
    return specs


def torchscript_tensors(path: Path, inputs: list[dict], ranges: dict) -> tuple[list, list]:
    """A TorchScript file's inputs as the user gave them (its file says neither dtypes nor
    shapes); its outputs from one run on two generated samples."""
    import torch

    module = torch.jit.load(str(path), map_location="cpu").eval()
    names = [a.name for a in module.forward.schema.arguments[1:]]
    if not inputs:
        raise Refused(f"a TorchScript file does not say its inputs' dtypes and shapes: give "
                      f"each of {', '.join(names) or 'its inputs'} as --input NAME:DTYPE:DIMS")
    if len(inputs) != len(names):
        raise Refused(f"the TorchScript module takes {len(names)} inputs ({', '.join(names)}); "
                      f"--input gave {len(inputs)}")
    arrays = generate_arrays(inputs, ranges, samples=2, seed=0)
    with torch.inference_mode():
        result = module(*[torch.from_numpy(arrays[s["name"]]) for s in inputs])
    result = result if isinstance(result, (tuple, list)) else (result,)
    # a run's shapes are concrete: its first dimension is the two samples' batch
    outputs = [_torch_spec(f"output__{i}", _Shaped(tensor), "output")
               for i, tensor in enumerate(result)]
    return inputs, outputs


class _Shaped:
    """A tensor of a run, its batch dimension marked dynamic as an export's would be."""

    def __init__(self, tensor):
        self.shape, self.dtype = [None, *tensor.shape[1:]], tensor.dtype
