"""Convert an exported FP32 model to the backend and precision of a run."""

from __future__ import annotations

import shutil
from pathlib import Path

from . import atomic, device
from .runtimes import torch_device


def copy_artifact(src: Path, dst: Path) -> None:
    """A file, or a folder (a SavedModel)."""
    if Path(src).is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)


def convert(run: dict, exported: Path, out: Path, sparse: Path | None = None) -> None:
    """`out`: the exported model converted for the run; for an ensemble (hps-*), the
    dense export converted beside the sparse storage exported in `sparse`."""
    if device.runs_on_device(run, "convert"):
        device.check(run["gpu"], run["allow_gpu_mismatch"])
    if run["backend"].get("dense"):
        from . import ensemble

        if sparse is None:
            raise ValueError(f"backend '{run['key']['backend']}' is an ensemble: its "
                             "conversion needs the sparse export (--sparse)")
        ensemble.convert(run, exported, sparse, out, _convert_into)
        return
    with atomic.output(out) as tmp:
        _convert_into(run, exported, tmp)


def _convert_into(run: dict, exported: Path, out: Path) -> None:
    runtime, precision = run["backend"]["runtime"], run["precision"]
    if runtime == "tensorrt":
        from .tensorrt import build_engine

        build_engine(run, exported, out)
    elif precision == "fp32" or runtime in ("onnxruntime-trt", "tensorflow",
                                            "tensorflow-trt"):
        # The export is FP32; ONNX Runtime's and TensorFlow's TensorRT accelerators and
        # TensorFlow's auto mixed precision apply FP16 themselves when they load it.
        copy_artifact(exported, out)
    elif runtime in ("torch", "torch-cudagraph"):
        import torch

        model = torch.jit.load(str(exported), map_location=torch_device(run["gpu"]))
        torch.jit.save(model.half(), str(out))
    elif runtime == "onnxruntime":
        import onnx
        from onnxconverter_common import float16

        model = float16.convert_float_to_float16(onnx.load(str(exported)), keep_io_types=True)
        onnx.save(model, str(out))
    else:
        raise ValueError(f"no conversion to {precision} for runtime '{runtime}'")
