"""The quantized precisions (int8, int8-weight-only, fp8): torchao's schemes applied to the
linear layers of the exported FP32 program on the device that runs it, before AOTInductor
(the convert step) or torch.compile (at load) compiles it (aoti.for_device).

torchao quantizes `nn.Linear` modules, and torch.export's program calls `aten.linear` on its
parameters instead: each such call whose weight nothing else reads becomes the call of an
`nn.Linear` holding the same parameters first (`as_linears`). Convolutions, recurrent layers,
embeddings and attention's matmuls stay FP32, and so does everything around the linear
layers. No scheme here calibrates: weight scales come from the weights, activation scales
are computed from each call's activations (dynamic), so no data set is read.

On a GPU some layers cannot take a scheme, and stay as they are (`unfit`, measured on an
H100 on 2026-12-07): CUDA's INT8 matmul (`_int_mm`) needs more than 16 rows and both
features a multiple of 8, so a layer fed one row a sample (a 2-D activation: the batch
alone, which a server sends from 1) or of an odd width fails at run time; torchao 0.18
takes a per-tensor FP8 weight of 128 x 128 for its 128 x 128 blockwise kind and refuses
the layer's per-tensor activation ("input_tensor must be 1x128 scaled").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .base import RunnerUnavailable


@dataclass(frozen=True)
class Scheme:
    config: str  # torchao.quantization's config class (its defaults)
    what: str  # what is quantized, and how, in the reports' words
    # the CUDA compute capability it needs (None: any GPU); runs on the CPU unless it needs one
    min_capability: tuple[int, int] | None = None


CALIBRATION = ("none, no data read: weight scales come from the weights, activation scales "
               "(int8, fp8) from each call's own activations")

# The one table of them (backends.PRECISIONS lists these names after fp32 and fp16).
SCHEMES = {
    "int8": Scheme(
        "Int8DynamicActivationInt8WeightConfig",
        "INT8 weights (symmetric, per output channel) and INT8 activations (symmetric, per "
        "row, dynamic): an INT8 matmul (aten._int_mm)"),
    "int8-weight-only": Scheme(
        "Int8WeightOnlyConfig",
        "INT8 weights (symmetric, per output channel), dequantized for a matmul in FP32 "
        "activations"),
    "fp8": Scheme(
        "Float8DynamicActivationFloat8WeightConfig",
        "FP8 E4M3 weights and activations (per-tensor scales, the activations' dynamic): an "
        "FP8 matmul (torch._scaled_mm)", min_capability=(8, 9)),
}


def refusal(precision: str, device) -> str | None:
    """Why `device` (a torch.device) cannot run `precision`'s scheme, or None."""
    scheme = SCHEMES.get(precision)
    if scheme is None or scheme.min_capability is None:
        return None
    need = ".".join(map(str, scheme.min_capability))
    why = (f"precision '{precision}' ({scheme.what}) needs an NVIDIA GPU of compute "
           f"capability {need} or later")
    if device.type != "cuda":
        return f"{why}; this runs on the CPU"
    import torch

    found = torch.cuda.get_device_capability(device)
    if found < scheme.min_capability:
        return (f"{why}; GPU {device.index or 0} ({torch.cuda.get_device_name(device)}) has "
                f"compute capability {found[0]}.{found[1]}")
    return None


def as_linears(module) -> tuple[int, int]:
    """Each `aten.linear` call of an exported program's module (a GraphModule) on a weight
    only linear calls read, and whose owner holds nothing else, made the call of an
    `nn.Linear` holding the same parameters, in place. Returns (made, linear calls)."""
    import torch

    linear, graph = torch.ops.aten.linear.default, module.graph
    calls = [n for n in graph.nodes if n.target is linear]
    made = 0
    for node in calls:
        x, weight, bias = (*node.args, None)[:3]
        prefix = weight.target.rpartition(".")[0] if weight.op == "get_attr" else ""
        if not _owns_only(module, prefix, bias) or any(u.target is not linear
                                                      for u in weight.users):
            continue
        owner = module.get_submodule(prefix)
        layer = torch.nn.Linear(owner.weight.shape[1], owner.weight.shape[0],
                                bias=bias is not None, device=owner.weight.device)
        layer.weight, layer.bias = owner.weight, getattr(owner, "bias", None)
        parent, _, name = prefix.rpartition(".")
        setattr(module.get_submodule(parent), name, layer)
        with graph.inserting_before(node):
            node.replace_all_uses_with(graph.call_module(prefix, (x,)))
        graph.erase_node(node)
        made += 1
    for node in list(graph.nodes):
        if node.op == "get_attr" and not node.users:
            graph.erase_node(node)
    module.recompile()
    return made, len(calls)


def _owns_only(module, prefix: str, bias) -> bool:
    """Whether the submodule `prefix` holds a 2-D weight, the bias the call reads (if any),
    and nothing else (so that replacing it by an nn.Linear loses nothing)."""
    if not prefix or (bias is not None and (bias.op != "get_attr"
                                            or bias.target != f"{prefix}.bias")):
        return False
    owner = module.get_submodule(prefix)
    held = {n for n, _ in owner.named_parameters(recurse=False)}
    held |= {n for n, _ in owner.named_buffers(recurse=False)}
    wanted = {"weight", "bias"} if bias is not None else {"weight"}
    return held == wanted and not list(owner.children()) and owner.weight.dim() == 2


def quantize(module, precision: str, device) -> int:
    """`module` (an exported program's, on `device`) with its linear layers quantized in
    `precision`'s scheme, in place; returns how many torchao quantized (it leaves a layer
    whose shape its kernel cannot take as it is: FP8's, one not a multiple of 16; on a GPU
    also those `unfit` names, each logged with its reason). Refuses
    a device that cannot run the scheme, and a model none of whose linear layers it
    quantized (its "int8" would be FP32 under another name)."""
    refused = refusal(precision, device)
    if refused:
        raise RunnerUnavailable(refused)
    import torch
    import torchao
    import torchao.quantization as tq

    rows = sample_rows(module)
    made, calls = as_linears(module)
    scheme = SCHEMES[precision]
    left = {name: why for name, layer in module.named_modules()
            if isinstance(layer, torch.nn.Linear)
            and (why := unfit(precision, device, layer.weight.shape, rows.get(name)))}
    if made:
        tq.quantize_(module, getattr(tq, scheme.config)(),
                     filter_fn=lambda layer, name: (isinstance(layer, torch.nn.Linear)
                                                    and name not in left))
    plain = (torch.Tensor, torch.nn.Parameter)
    done = sum(isinstance(m, torch.nn.Linear) and type(m.weight) not in plain
               for m in module.modules())
    if not done:
        raise ValueError(f"precision '{precision}': torchao quantized no linear layer of the "
                         f"model ({calls} aten.linear calls, {made} on a weight of their own); "
                         "it would run in FP32 under another name")
    print(f"{precision}: torchao {torchao.__version__} {scheme.config} quantized {done} of "
          f"{calls} linear layers ({scheme.what}); calibration {CALIBRATION}", file=sys.stderr,
          flush=True)
    for name, why in left.items():
        print(f"{precision}: {name} left as it is: {why}", file=sys.stderr, flush=True)
    return done


def sample_rows(module) -> dict[str, int | None]:
    """Each `aten.linear` call's rows a sample (its activation's leading dimensions at
    batch 1; None where the program's shapes do not say), by its weight's owner: the rows
    CUDA's INT8 matmul gets at the smallest batch a server sends."""
    import math

    import torch

    rows = {}
    for node in module.graph.nodes:
        weight = node.args[1] if node.target is torch.ops.aten.linear.default else None
        if weight is None or weight.op != "get_attr":
            continue
        value = node.args[0].meta.get("val")
        rows[weight.target.rpartition(".")[0]] = None if value is None else int(math.prod(
            d if isinstance(d, int) else d.node.expr.subs({s: 1 for s in d.node.expr.free_symbols})
            for d in value.shape[:-1]))
    return rows


def unfit(precision: str, device, shape, rows: int | None) -> str | None:
    """Why a linear layer (weight `shape`: out x in, `rows` a sample) cannot take
    `precision`'s scheme on `device`, or None."""
    if device.type != "cuda":
        return None
    out_features, in_features = shape
    if precision == "int8":
        if in_features % 8 or out_features % 8:
            return (f"CUDA's INT8 matmul needs both features a multiple of 8 "
                    f"({in_features} -> {out_features})")
        if rows is None or rows <= 16:
            return (f"CUDA's INT8 matmul needs more than 16 rows, and this layer gets "
                    f"{'an unknown number' if rows is None else rows} a sample (batch 1)")
    if precision == "fp8" and (out_features, in_features) == (128, 128):
        return ("torchao 0.18 takes a per-tensor FP8 weight of 128 x 128 for a blockwise one "
                "and refuses its activation")
    return None
