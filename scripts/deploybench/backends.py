"""The backend keys (the reference documents' format mnemonics) and what each one needs.

One table: which exported format a backend converts from, the file it serves, the
in-process runner that runs it (in the python backend and in the native step), the Triton
backend that serves it without the python backend on a full Triton install, and what the
device must have.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .runners.quantization import SCHEMES

# Exported formats: source model -> file, FP32 unless a model's `export.precision` says
# otherwise (config.Configuration.export_precision).
EXPORT_ARTIFACTS = {"onnx": "model.onnx", "ts-trace": "model.pt", "ts-script": "model.pt",
                    "torch-export": "model.pt2",  # torch.export's program (ExportedProgram)
                    "tf-savedmodel": "model.savedmodel",  # a SavedModel is a folder
                    # the dense part of a recommender alone (embedding tables left out)
                    "dense-onnx": "model.onnx", "dense-savedmodel": "model.savedmodel",
                    # a user's Triton model folder (config.pbtxt, its version), as it is
                    "triton-repository": "model.repository"}
# A sparse/dense ensemble's converted model: a folder of dense/<artifact> and sparse/.
ENSEMBLE_ARTIFACT = "model.ensemble"

# The precisions of a key: the floating ones, then the quantized ones (torchao's schemes,
# runners/quantization.py), which only the formats built from torch.export's program carry
# (Backend.precisions). An export is in a floating precision only: quantization is the
# convert step's, on the device.
FLOAT_PRECISIONS = ("fp32", "fp16")
QUANTIZED = tuple(SCHEMES)
PRECISIONS = (*FLOAT_PRECISIONS, *QUANTIZED)
# The precision of an export where a model's config says none: the source model's.
EXPORT_PRECISION = "fp32"
# The formats a PyTorch model exports in FP16 (model.half() before the trace or the ONNX
# export). The others stay FP32: torch.export's program is cast on the device by the convert
# step (aoti, torch-compile), a TensorFlow model's FP16 is TF's auto mixed precision or
# TensorRT's, an ensemble's dense part is built from FP32 lookups.
FP16_EXPORTS = ("onnx", "ts-trace", "ts-script")


def is_ensemble(run: dict) -> bool:
    """Whether a run's backend is a sparse/dense ensemble (hps-*: its `dense` part)."""
    return bool(run["backend"].get("dense"))


def served_as_is(run: dict) -> bool:
    """Whether a run's model is a user's Triton repository, served as it is."""
    return run["backend"]["export"] == "triton-repository"


def export_precision(run: dict) -> str:
    """The precision a run's export was written in. A run records it only where it is not
    FP32, so that the settings of every FP32-export configuration (what Snakemake compares)
    stay as they were; a scenario's JSON records it always (`export_precision`)."""
    return run.get("export_precision", EXPORT_PRECISION)


@dataclass(frozen=True)
class Backend:
    key: str
    title: str          # as the reference tables name it
    export: str         # key of EXPORT_ARTIFACTS it is converted from
    artifact: str       # file name of the converted model
    runner: str | None  # the in-process runner (deploybench.runners) that runs it (None:
    #                     a user's repository, served as it is by its own backend)
    triton_backend: str | None  # the Triton backend that serves it (None: python only)
    needs_gpu: bool = False
    dense: str | None = None  # an ensemble: the backend key that serves its dense part
    precisions: tuple[str, ...] = FLOAT_PRECISIONS  # those its format carries

    def as_dict(self) -> dict:
        """The fields a run records (`dense` only for an ensemble; not `precisions`, the
        run has its own: so that the settings of every other configuration, and what
        Snakemake compares, stay as they were)."""
        fields = asdict(self)
        del fields["precisions"]
        if fields["dense"] is None:
            del fields["dense"]
        return fields


def carriers(precision: str) -> list[str]:
    """The backend keys whose format carries `precision`."""
    return [key for key, backend in BACKENDS.items() if precision in backend.precisions]


BACKENDS = {
    b.key: b
    for b in (
        Backend("onnx", "ONNX Runtime", "onnx", "model.onnx", "onnxruntime", "onnxruntime"),
        # The references' "ONNX Runtime with TensorRT backend accelerator": the ONNX model,
        # TensorRT engines built by ONNX Runtime at load time.
        Backend("ort-trt", "ONNX Runtime + TensorRT accelerator", "onnx", "model.onnx",
                "onnxruntime-trt", "onnxruntime", needs_gpu=True),
        Backend("trt", "NVIDIA TensorRT", "onnx", "model.plan", "tensorrt", "tensorrt",
                needs_gpu=True),
        Backend("ts-trace", "PyTorch (TorchScript trace)", "ts-trace", "model.pt", "torch",
                "pytorch"),
        Backend("ts-script", "PyTorch (TorchScript script)", "ts-script", "model.pt", "torch",
                "pytorch"),
        # FP16: the references' "Automatic FP16" accelerator (TF's auto mixed precision).
        Backend("tf-savedmodel", "TensorFlow SavedModel", "tf-savedmodel", "model.savedmodel",
                "tensorflow", "tensorflow"),
        # The SavedModel with TensorFlow's TensorRT integration (TF-TRT), at the run's
        # precision: on a full Triton, the tensorrt accelerator of its tensorflow backend.
        Backend("tf-trt", "TensorFlow + TensorRT accelerator (TF-TRT)", "tf-savedmodel",
                "model.savedmodel", "tensorflow-trt", "tensorflow", needs_gpu=True),
        # The fastest PyTorch path the python backend serves honestly without TensorRT.
        Backend("ts-trace-cg", "PyTorch (TorchScript trace + CUDA graphs)", "ts-trace",
                "model.pt", "torch-cudagraph", None, needs_gpu=True),
        # PyTorch 2's counterparts of a TensorRT plan: the exported program compiled ahead
        # of time for the device (AOTInductor), or by torch.compile when it is loaded.
        # a full Triton (26.03 and later) serves the package in its pytorch backend too
        # (platform torch_aoti, a beta: deploybench.triton.config). They alone carry the
        # quantized precisions: torch.export carries torchao's quantized weights (tensor
        # subclasses) and their ops into both compilers. TorchScript does not: a scripted or
        # traced torchao model saves each weight as a plain FP32 tensor that is neither the
        # source's nor the dequantized one (torch 2.13, torchao 0.18: docs), and the
        # tracer, hence the ONNX exporter, fails on INT8 activations (an internal assert).
        # ONNX Runtime, TensorRT and TensorFlow quantize with tools of their own (ONNX
        # Runtime's quantizer, ModelOpt), not torchao.
        Backend("aoti", "PyTorch 2 (torch.export + AOTInductor)", "torch-export", "model.pt2",
                "aoti", "pytorch", precisions=PRECISIONS),
        Backend("torch-compile", "PyTorch 2 (torch.compile)", "torch-export", "model.pt2",
                "torch-compile", None, precisions=PRECISIONS),
        # The package replayed as CUDA graphs, as ts-trace-cg replays a trace: AOTInductor
        # launches every kernel from the CPU on each call (TFT: 6.5 ms at any batch to 512
        # on an H100, results/tft/h100/aoti-2026-11-24/)
        Backend("aoti-cg", "PyTorch 2 (AOTInductor + CUDA graphs)", "torch-export",
                "model.pt2", "aoti-cudagraph", None, needs_gpu=True, precisions=PRECISIONS),
        # Recommender ensembles (reference 003's Merlin HPS + dense deployment): a sparse model
        # (hierarchical embedding storage, deploybench.ensemble) feeding the dense part
        # served as the backend key `dense` serves a model.
        Backend("hps-onnx", "Ensemble: hierarchical embeddings + ONNX Runtime", "dense-onnx",
                ENSEMBLE_ARTIFACT, "ensemble", "ensemble", dense="onnx"),
        Backend("hps-trt", "Ensemble: hierarchical embeddings + NVIDIA TensorRT",
                "dense-onnx", ENSEMBLE_ARTIFACT, "ensemble", "ensemble", needs_gpu=True,
                dense="trt"),
        Backend("hps-tf-savedmodel", "Ensemble: hierarchical embeddings + TensorFlow",
                "dense-savedmodel", ENSEMBLE_ARTIFACT, "ensemble", "ensemble",
                dense="tf-savedmodel"),
        # A user's Triton model repository (deploybench add-model), served as it is by the
        # backend its config.pbtxt names: no conversion, no runner of ours.
        Backend("repository", "Triton model repository (as it is)", "triton-repository",
                "model.repository", None, None),
    )
}
