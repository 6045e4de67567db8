"""Run a converted artifact in-process (the conversion check), as Triton would serve it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np


class RuntimeUnavailable(RuntimeError):
    """The runtime a backend needs is not installed or has no device here."""


def torch_device(gpu: dict):
    import torch

    if gpu["kind"] == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeUnavailable(
            f"GPU key '{gpu['key']}' needs CUDA, and torch sees no CUDA device here"
        )
    return torch.device("cuda:0")


def load(artifact: Path, runtime: str, precision: str, gpu: dict,
         input_names: list[str]) -> Callable:
    """A function list[np.ndarray] (in the order of `input_names`) -> FP32 outputs."""
    if runtime == "torch":
        import torch

        device = torch_device(gpu)
        model = torch.jit.load(str(artifact), map_location=device).eval()

        def run(arrays):
            with torch.inference_mode():
                tensors = [torch.from_numpy(a).to(device) for a in arrays]
                if precision == "fp16":
                    tensors = [t.half() if t.is_floating_point() else t for t in tensors]
                result = model(*tensors)
                result = result if isinstance(result, (tuple, list)) else (result,)
                return [r.float().cpu().numpy() for r in result]

        return run
    if runtime == "onnxruntime":
        import onnxruntime as ort

        providers = ["CPUExecutionProvider"]
        if gpu["kind"] == "gpu":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise RuntimeUnavailable(
                    "onnxruntime here has no CUDAExecutionProvider (install onnxruntime-gpu) "
                    f"for GPU key '{gpu['key']}'"
                )
            providers.insert(0, "CUDAExecutionProvider")
        session = ort.InferenceSession(str(artifact), providers=providers)
        # An exported graph drops inputs the model never reads (TFT's id): feed the rest.
        types = {i.name: i.type for i in session.get_inputs()}

        def run(arrays):
            feed = {n: (a.astype(np.float16) if types[n] == "tensor(float16)" else a)
                    for n, a in zip(input_names, arrays) if n in types}
            return [np.asarray(o, dtype=np.float32) for o in session.run(None, feed)]

        return run
    if runtime == "tensorrt":
        from .tensorrt import load_engine

        return load_engine(artifact)
    raise ValueError(f"unknown runtime '{runtime}'")
