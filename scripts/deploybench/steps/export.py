"""Export the source model (on the CPU): a PyTorch plug-in to TorchScript (trace, script)
or ONNX, in FP32 or FP16 (the model halved first), a TensorFlow plug-in to a SavedModel or
ONNX (tf2onnx, FP32); a recommender's dense part (dense-*) and its embedding storage
(sparse_export) for its ensembles."""

from __future__ import annotations

from pathlib import Path

from .. import artifacts, plugins
from ..backends import EXPORT_PRECISION, FP16_EXPORTS
from ..records import atomic, layout
from ..records.files import copy_artifact
from ..source import model as source_model

ONNX_OPSET = 17  # where a model's `export.onnx_opset` (its reference's) says none
EXPORT_MAX_BATCH = 1 << 16  # torch.export's bound of the batch dimension
FORMATS = {"torch": ("ts-trace", "ts-script", "onnx", "torch-export"),
           "tensorflow": ("tf-savedmodel", "onnx", "dense-savedmodel", "dense-onnx")}


def export(spec: dict, folder: str, weights: Path, eval_set: Path, out: Path) -> None:
    """`out`: the source model exported as its export folder's name says (format and
    precision, layout.export_folder)."""
    format, precision = layout.export_of(folder)
    own = getattr(plugins.load(spec["plugin"]), "own_export", lambda *_: None)(
        spec["hparams"], format)
    if own is not None:  # a user's model file or folder: its own format is itself
        if precision != EXPORT_PRECISION:
            raise ValueError(f"a user's model is exported as it is, in its own precision, "
                             f"not as '{folder}': set its export.precision to fp32")
        with atomic.output(out) as tmp:
            copy_artifact(own, tmp)
        return
    framework = source_model.framework(spec)
    if format not in FORMATS[framework]:
        raise ValueError(f"model '{spec['plugin']}' is a {framework} model: it exports to "
                         f"{', '.join(FORMATS[framework])}, not '{format}'")
    half = precision != EXPORT_PRECISION
    if half and (framework != "torch" or format not in FP16_EXPORTS):
        raise ValueError(
            f"model '{spec['plugin']}' ({framework}) exports '{format}' in FP32 only: FP16 "
            f"exports are a PyTorch model's {', '.join(FP16_EXPORTS)} (a TensorFlow model's "
            "FP16 is applied by its conversion or at load); set its export.precision to fp32")
    model, inputs = artifacts.exportable(spec, format, source_model.load(spec, weights))
    opset = spec.get("export", {}).get("onnx_opset", ONNX_OPSET)
    if framework == "tensorflow":
        from ..source import keras_export

        with atomic.output(out) as tmp:
            if format.endswith("savedmodel"):
                keras_export.save_savedmodel(model, inputs, spec["outputs"], tmp)
            else:
                keras_export.save_onnx(model, inputs, spec["outputs"], tmp, opset)
        return
    import torch

    samples, _, _ = source_model.load_eval(spec, eval_set)
    example = tuple(torch.from_numpy(a[:2]) for a in samples)  # a real batch of two
    if half:  # the graph in FP16, its floating inputs too (the runners cast what they get)
        model = model.half()
        example = tuple(t.half() if t.is_floating_point() else t for t in example)
    with atomic.output(out) as tmp, torch.no_grad():
        if format == "ts-trace":
            torch.jit.save(torch.jit.trace(model, example), str(tmp))
        elif format == "ts-script":
            torch.jit.save(torch.jit.script(model), str(tmp))
        elif format == "torch-export":
            torch.export.save(_torch_export(spec, model, example), str(tmp))
        else:
            names_in = [t["name"] for t in inputs]
            names_out = [t["name"] for t in spec["outputs"]]
            torch.onnx.export(
                model, example, str(tmp), input_names=names_in, output_names=names_out,
                dynamic_axes={n: {0: "batch"} for n in names_in + names_out},
                opset_version=opset, dynamo=False,
            )


def _torch_export(spec: dict, model, example: tuple):
    """The model as an ExportedProgram with a dynamic batch dimension, or a refusal of the
    backends built from it that carries the exporter's own message."""
    import torch

    batch = torch.export.Dim("batch", min=1, max=EXPORT_MAX_BATCH)
    try:
        return torch.export.export(model, example,
                                   dynamic_shapes=tuple({0: batch} for _ in example))
    except Exception as error:  # torch.export raises many types (Unsupported, UserError...)
        raise ValueError(
            f"model '{spec['plugin']}' cannot be exported with torch.export, which the "
            f"backends aoti and torch-compile are built from; the exporter said: "
            f"{type(error).__name__}: {error}") from error


def sparse_export(spec: dict, weights: Path, data: Path, out: Path) -> None:
    """A recommender's tables, stacked, with each table's rows ranked by their frequency
    in the training split: the storage of its ensembles' sparse model."""
    artifacts.export_sparse(spec, weights, data, out)
