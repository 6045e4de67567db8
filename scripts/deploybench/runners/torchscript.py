"""TorchScript (a trace or a script) in torch: the runner `torch`."""

from __future__ import annotations

from pathlib import Path

from .base import Options, Runner, as_fp32


def device(options: Options):
    import torch

    return torch.device("cpu" if options.device_id is None else f"cuda:{options.device_id}")


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """FP16: the module's weights cast to half on the device it will run on."""
    if options.precision == "fp32":
        return False
    import torch

    model = torch.jit.load(str(exported), map_location=device(options))
    torch.jit.save(model.half(), str(out))
    return True


class TorchScriptRunner(Runner):
    """Host arrays in, moved to the device (floating ones to FP16 for an FP16 model), the
    module run under inference mode, its outputs copied back as numpy."""

    def __init__(self, artifact: Path, options: Options):
        import torch

        self.torch = torch
        if options.threads:
            torch.set_num_threads(options.threads)
        self.device = device(options)
        self.fp16 = options.precision == "fp16"
        if not self.fp16:
            # FP32 means FP32: no TF32 in cuDNN convolutions/RNNs or matmuls (Ampere+
            # would otherwise round them to 10-bit mantissas).
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        self.model = torch.jit.load(str(artifact), map_location=self.device).eval()

    def __call__(self, arrays):
        torch = self.torch
        with torch.inference_mode():
            tensors = []
            for array in arrays:
                tensor = torch.from_numpy(array).to(self.device, non_blocking=True)
                if self.fp16 and tensor.is_floating_point():
                    tensor = tensor.half()
                tensors.append(tensor)
            result = self.model(*tensors)
            result = result if isinstance(result, (tuple, list)) else (result,)
            return [as_fp32(r.cpu().numpy()) for r in result]


def load(name: str, artifact: Path, options: Options) -> TorchScriptRunner:
    return TorchScriptRunner(artifact, options)
