"""Run a converted artifact in-process (conversion check, native throughput) with the
same code Triton's python backend serves it with (`triton_python_model.ArtifactRunner`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .triton_python_model import ArtifactRunner


class RuntimeUnavailable(RuntimeError):
    """The runtime a backend needs is not installed or has no device here."""


def device_id(gpu: dict) -> int | None:
    """CUDA device 0 for a GPU key, None (CPU) for the cpu key or a stand-in node whose
    GPU-key check was overridden."""
    if gpu["kind"] == "cpu":
        return None
    import torch

    return 0 if torch.cuda.is_available() else None


def load(artifact: Path, run: dict) -> Callable:
    """A function list[np.ndarray] (in the order of the model's inputs) -> FP32 outputs."""
    runtime = run["backend"]["runtime"]
    if run["backend"].get("dense"):  # a sparse/dense ensemble: both parts in-process
        from .ensemble import EnsembleRunner

        return EnsembleRunner(artifact, run)
    if runtime == "tensorrt":
        from .tensorrt import EngineRunner

        model = run["model"]
        return EngineRunner(artifact, [t["name"] for t in model["inputs"]],
                            [t["name"] for t in model["outputs"]])
    dev = device_id(run["gpu"])
    if runtime.startswith("onnxruntime") and dev is not None:
        import onnxruntime as ort

        wanted = "TensorrtExecutionProvider" if runtime == "onnxruntime-trt" else \
            "CUDAExecutionProvider"
        if wanted not in ort.get_available_providers():
            raise RuntimeUnavailable(
                f"onnxruntime here has no {wanted} (install onnxruntime-gpu"
                + (" and TensorRT" if runtime == "onnxruntime-trt" else "")
                + f") for backend '{run['key']['backend']}' on GPU key '{run['gpu']['key']}'")
    return ArtifactRunner(artifact, runtime, run["precision"],
                          [t["name"] for t in run["model"]["inputs"]], device_id=dev,
                          max_batch_size=run["model"]["triton"]["max_batch_size"])


def torch_device(gpu: dict):
    import torch

    dev = device_id(gpu)
    return torch.device("cpu" if dev is None else f"cuda:{dev}")
