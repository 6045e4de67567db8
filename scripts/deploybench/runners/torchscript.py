"""TorchScript (a trace or a script) in torch: the runner `torch`; and what every torch
runner shares (`TorchRunner`): host arrays to the device and back, FP16 inputs for an FP16
model, device tensors in and out (`run_tensors`)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .base import Options, Runner, as_fp32

PACKED_UPLOAD_BYTES = 1 << 20


@functools.cache
def torch_dtype(dtype: np.dtype):
    import torch

    return torch.from_numpy(np.zeros(0, dtype)).dtype


def device(options: Options):
    import torch

    return torch.device("cpu" if options.device_id is None else f"cuda:{options.device_id}")


def set_precision(options: Options) -> None:
    """FP32 means FP32: no TF32 in cuDNN convolutions/RNNs or matmuls (Ampere and later
    would otherwise round them to 10-bit mantissas), also in the FP32 layers of a quantized
    model (as the C++ backend has it)."""
    import torch

    if options.precision != "fp16":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def strict_convolutions(module) -> int:
    """A trace records whether each convolution may use TF32 as a constant of its graph (the
    global flag's value when it was traced: on, by default), which set_precision cannot
    change: an FP32 model's are made strict, in every method of every submodule (the C++
    backend does the same). Returns how many it changed."""
    changed = 0
    for part in module.modules():
        for name in part._c._method_names():
            graph = part._c._get_method(name).graph
            for node in graph.findAllNodes("aten::_convolution"):
                with graph.insert_point_guard(node):
                    node.replaceInput(12, graph.insertConstant(False))
                changed += 1
    return changed


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """FP16: the module's weights cast to half on the device it will run on."""
    if options.precision == "fp32":
        return False
    import torch

    model = torch.jit.load(str(exported), map_location=device(options))
    torch.jit.save(model.half(), str(out))
    return True


class TorchRunner(Runner):
    """A callable of torch tensors (`self.model`) as a runner. `aliased`: the model's
    outputs are buffers its next call overwrites (a CUDA graph's), so outputs handed out
    on the device are copies."""

    aliased = False

    def __init__(self, options: Options):
        import torch

        self.torch = torch
        if options.threads:
            torch.set_num_threads(options.threads)
        self.device = device(options)
        self.fp16 = options.precision == "fp16"
        set_precision(options)
        self.model = None

    def to_device(self, tensors: list) -> list:
        """Inputs on the runner's device, floating ones in FP16 for an FP16 model."""
        out = []
        for tensor in tensors:
            tensor = tensor.to(self.device, non_blocking=True)
            out.append(tensor.half() if self.fp16 and tensor.is_floating_point() else tensor)
        return out

    def _forward(self, tensors: list) -> tuple:
        with self.torch.inference_mode():
            result = self.model(*self.to_device(tensors))
        return tuple(result) if isinstance(result, (tuple, list)) else (result,)

    def run_tensors(self, tensors: list) -> list:
        """Device (or host) tensors in, the model's outputs on the device out (FP32 for
        floating ones, as the configs declare them), owned by the caller."""
        result = self._forward(tensors)
        out = [r.float() if r.is_floating_point() else r for r in result]
        if self.aliased:  # .float() of FP16 made copies already
            out = [o.clone() if o is r else o for o, r in zip(out, result)]
        return out

    def upload(self, arrays: list[np.ndarray]) -> list:
        """Host arrays as tensors on the device. Small inputs go to a GPU in one copy:
        packed into one host buffer (each at a 16-byte offset), copied, then viewed apart,
        where a copy per input costs a synchronous transfer each (eight for TFT); large
        ones one by one (the packing would copy them once more on the host)."""
        torch = self.torch
        arrays = [np.ascontiguousarray(a) for a in arrays]
        if self.device.type != "cuda" or sum(a.nbytes for a in arrays) > PACKED_UPLOAD_BYTES:
            return [torch.from_numpy(a) for a in arrays]
        offsets, size = [], 0
        for a in arrays:
            offsets.append(size)
            size += -(-a.nbytes // 16) * 16
        packed = np.empty(size, np.uint8)
        for a, offset in zip(arrays, offsets):
            packed[offset:offset + a.nbytes] = a.reshape(-1).view(np.uint8)
        on_device = torch.from_numpy(packed).to(self.device)
        return [on_device[offset:offset + a.nbytes].view(torch_dtype(a.dtype)).reshape(a.shape)
                for a, offset in zip(arrays, offsets)]

    def __call__(self, arrays):
        return [as_fp32(r.cpu().numpy()) for r in self._forward(self.upload(arrays))]


class TorchScriptRunner(TorchRunner):
    def __init__(self, artifact: Path, options: Options):
        super().__init__(options)
        self.model = self.torch.jit.load(str(artifact), map_location=self.device).eval()
        if options.precision == "fp32":
            strict_convolutions(self.model)


def load(name: str, artifact: Path, options: Options) -> TorchScriptRunner:
    return TorchScriptRunner(artifact, options)
