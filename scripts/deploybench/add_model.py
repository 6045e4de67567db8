"""A model config for a user's model file (`deploybench add-model`, the `artifact` plug-in):
its tensors read from the file (names, dtypes, shapes, a dynamic batch), what the file
cannot tell asked for (TorchScript's inputs; an integer input's range), samples generated
from the specs or the user's checked, the backends that serve its format, and settings small
enough for a first run on a CPU. Reading a file runs none of its code: ONNX
is a protobuf; a `.pt2` package is deserialised by torch.export (no pickle); a TorchScript
file is loaded by TorchScript's own loader, which runs no Python."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .models.artifact import digest, input_arrays
from .tensors import check_arrays, numpy_dtype

FORMATS = {".onnx": "onnx", ".pt": "torchscript", ".ts": "torchscript",
           ".torchscript": "torchscript", ".pt2": "pt2"}
# The backends that serve each format (built from the file itself)
BACKENDS = {"onnx": ["onnx"], "torchscript": ["ts-script"], "pt2": ["aoti", "torch-compile"]}
ONNX_TYPES = {1: "FP32", 10: "FP16", 11: "FP64", 6: "INT32", 7: "INT64", 5: "INT16",
              3: "INT8", 2: "UINT8", 9: "BOOL"}
# torch's dtype names are numpy's: the Triton dtypes of the config's tensors by that name
TORCH_TYPES = {np.dtype(numpy_dtype(t)).name: t for t in ONNX_TYPES.values()}
INTEGERS = {t for t in ONNX_TYPES.values() if np.issubdtype(numpy_dtype(t), np.integer)}


class Refused(ValueError):
    """What add-model cannot take, and what would do."""


def format_of(path: Path, given: str | None) -> str:
    if given:
        if given not in BACKENDS:
            raise Refused(f"format '{given}' is not one add-model reads; valid: "
                          f"{', '.join(BACKENDS)}")
        return given
    if path.suffix not in FORMATS:
        raise Refused(f"'{path.name}': add-model cannot tell its format from '{path.suffix}'; "
                      f"name it (--format {'|'.join(BACKENDS)}) or use one of "
                      f"{', '.join(FORMATS)}")
    return FORMATS[path.suffix]


def _batched(name: str, dims: list[int], what: str) -> list[int]:
    """The dims without the batch dimension, which must be dynamic (-1)."""
    if not dims or dims[0] != -1:
        raise Refused(f"{what} '{name}' has shape {dims}: add-model takes models whose first "
                      "dimension is a dynamic batch (export it so: dynamic_axes, Dim)")
    return dims[1:]


def _onnx(path: Path) -> tuple[list[dict], list[dict]]:
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
                "dims": _batched(value.name, dims, what)}
    return ([spec(v, "input") for v in graph.input if v.name not in weights],
            [spec(v, "output") for v in graph.output])


def _torch_spec(name: str, value, what: str) -> dict:
    dims = [int(d) if isinstance(d, int) else -1 for d in value.shape]
    dtype = str(value.dtype).removeprefix("torch.")
    if dtype not in TORCH_TYPES:
        raise Refused(f"{what} '{name}' is {dtype}; valid: {', '.join(TORCH_TYPES)}")
    return {"name": name, "dtype": TORCH_TYPES[dtype], "dims": _batched(name, dims, what)}


def _pt2(path: Path) -> tuple[list[dict], list[dict]]:
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
        if len(parts) != 3 or parts[1] not in TORCH_TYPES.values():
            raise Refused(f"--input '{text}' is not NAME:DTYPE:DIMS with DTYPE one of "
                          f"{', '.join(TORCH_TYPES.values())} (e.g. x:FP32:4 or ids:INT64:3)")
        try:
            dims = [int(d) for d in parts[2].split(",") if d]
        except ValueError as err:
            raise Refused(f"--input '{text}': dims are integers, comma-separated") from err
        specs.append({"name": parts[0], "dtype": parts[1], "dims": dims})
    return specs


def _torchscript(path: Path, inputs: list[dict], ranges: dict) -> tuple[list, list]:
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


def model_config(name: str, path: Path, fmt: str | None = None, inputs: list[str] = (),
                 ranges: list[str] = (), data: Path | None = None, max_batch: int = 32,
                 samples: Path | None = None, p99_budget_ms: float = 100.0) -> dict:
    """The model config of a user's model file (config/models/NAME.yaml). `data`: the
    user's samples (checked against the specs); otherwise generated ones are written to
    `samples` (an .npz beside the config). `p99_budget_ms`: the budget of its rate
    scenario, whose rates are fractions of the online sweep's peak, and of what to ship."""
    if not p99_budget_ms > 0:
        raise Refused(f"--p99 {p99_budget_ms}: a budget of more than 0 ms")
    path = Path(path).resolve()
    if not path.is_file():
        raise Refused(f"'{path}' is not a file")
    if max_batch < 1:
        raise Refused(f"--max-batch {max_batch}: a batch of one at least")
    fmt = format_of(path, fmt)
    bounds = parse_ranges(list(ranges))
    if fmt == "onnx":
        ins, outs = _onnx(path)
    elif fmt == "pt2":
        ins, outs = _pt2(path)
    else:  # TorchScript: the inputs the user gave, checked by a run on generated values
        ins = parse_inputs(list(inputs))
    values = integer_ranges(ins, bounds, data)
    if fmt not in ("onnx", "pt2"):
        ins, outs = _torchscript(path, ins, values)
    if data is not None:
        check_data(Path(data), ins)
    else:
        arrays = generate_arrays(ins, values, 64, seed=0)
        with open(samples, "wb") as f:
            np.savez(f, **arrays)
    batches = sorted({1, max(1, max_batch // 4), max_batch})
    return {
        "plugin": "artifact",
        "title": f"{name} ({fmt} file {path.name})",
        "backends": BACKENDS[fmt],
        "hparams": {"artifact": str(path), "format": fmt, "sha256": digest(path),
                    "inputs": ins},
        "weights": {"checkpoint": None, "seed": 0},
        "data": {"path": str(Path(data if data is not None else samples).resolve()),
                 "split": "test", "samples": 64},
        "inputs": ins,
        "outputs": outs,
        "conversion": {"batch_size": 8, "tolerance": {"fp32": {"atol": 1e-4, "rtol": 1e-3},
                                                      "fp16": {"atol": 5e-2, "rtol": 5e-2}}},
        "accuracy": {"batch_size": 8, "max_abs_deviation": {"fp32": 1e-4, "fp16": 5e-2}},
        "triton": {"max_batch_size": max_batch, "instances": 1,
                   "preferred_batch_sizes": [max_batch], "max_queue_delay_us": 100},
        "offline": {"batch_sizes": batches, "measurement_request_count": 20},
        "online": {"batch_size": 1, "concurrency": [1, 2, 4], "measurement_request_count": 20},
        # up to the closed-loop peak: on a small machine a fast model's load generator
        # shares its cores, and a level it cannot send in 20 s counts as beyond the budget
        "rate": {"batch_size": 1, "rates_of_peak": [0.25, 0.5, 0.75, 1.0],
                 "distribution": "poisson", "p99_budget_ms": p99_budget_ms,
                 "bisection_steps": 1, "min_requests": 200, "min_window_ms": 1000,
                 "level_timeout_s": 20},
    }


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
