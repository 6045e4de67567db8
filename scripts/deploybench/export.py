"""Export the model source (FP32, CPU) to TorchScript (trace, script) or ONNX."""

from __future__ import annotations

from pathlib import Path

import torch

from . import atomic, source

ONNX_OPSET = 17


def export(settings: dict, fmt: str, weights: Path, eval_npz: Path, out: Path) -> None:
    model = source.load_model(settings, weights)
    inputs, _, _ = source.load_eval(settings, eval_npz)
    example = tuple(torch.from_numpy(a[:2]) for a in inputs)  # a real batch of two
    with atomic.output(out) as tmp, torch.no_grad():
        if fmt == "ts-trace":
            torch.jit.save(torch.jit.trace(model, example), str(tmp))
        elif fmt == "ts-script":
            torch.jit.save(torch.jit.script(model), str(tmp))
        elif fmt == "onnx":
            names_in = [t["name"] for t in settings["inputs"]]
            names_out = [t["name"] for t in settings["outputs"]]
            torch.onnx.export(
                model, example, str(tmp), input_names=names_in, output_names=names_out,
                dynamic_axes={n: {0: "batch"} for n in names_in + names_out},
                opset_version=ONNX_OPSET, dynamo=False,
            )
        else:
            raise ValueError(f"unknown export format '{fmt}'; valid: ts-trace, ts-script, onnx")
