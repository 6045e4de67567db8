"""Export the model source (FP32, CPU): a PyTorch plug-in to TorchScript (trace, script)
or ONNX, a TensorFlow plug-in to a SavedModel or ONNX (tf2onnx)."""

from __future__ import annotations

from pathlib import Path

import torch

from . import atomic, source

ONNX_OPSET = 17
FORMATS = {"torch": ("ts-trace", "ts-script", "onnx"),
           "tensorflow": ("tf-savedmodel", "onnx", "dense-savedmodel", "dense-onnx")}


def export(settings: dict, fmt: str, weights: Path, eval_npz: Path, out: Path) -> None:
    framework = source.framework(settings)
    if fmt not in FORMATS[framework]:
        raise ValueError(f"model '{settings['plugin']}' is a {framework} model: it exports to "
                         f"{', '.join(FORMATS[framework])}, not '{fmt}'")
    model = source.load_model(settings, weights)
    inputs, _, _ = source.load_eval(settings, eval_npz)
    if framework == "tensorflow":
        _export_tf(settings, model, fmt, out)
        return
    example = tuple(torch.from_numpy(a[:2]) for a in inputs)  # a real batch of two
    with atomic.output(out) as tmp, torch.no_grad():
        if fmt == "ts-trace":
            torch.jit.save(torch.jit.trace(model, example), str(tmp))
        elif fmt == "ts-script":
            torch.jit.save(torch.jit.script(model), str(tmp))
        else:
            names_in = [t["name"] for t in settings["inputs"]]
            names_out = [t["name"] for t in settings["outputs"]]
            torch.onnx.export(
                model, example, str(tmp), input_names=names_in, output_names=names_out,
                dynamic_axes={n: {0: "batch"} for n in names_in + names_out},
                opset_version=ONNX_OPSET, dynamo=False,
            )


def _export_tf(settings: dict, model, fmt: str, out: Path) -> None:
    from . import tf_export

    inputs = settings["inputs"]
    if fmt.startswith("dense-"):  # the ensemble's dense part: the lookups come in
        from . import ensemble

        tables, model = ensemble.split_model(settings, model)
        meta = {"table_sizes": [len(t) for t in tables], "embedding_dim": tables[0].shape[1]}
        inputs = ensemble.dense_inputs(settings, meta)
    with atomic.output(out) as tmp:
        if fmt.endswith("savedmodel"):
            tf_export.save_savedmodel(model, inputs, settings["outputs"], tmp)
        else:
            tf_export.save_onnx(model, inputs, settings["outputs"], tmp, ONNX_OPSET)
