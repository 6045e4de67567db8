"""ONNX -> TensorRT plan (TensorRT Python API), and running a plan in-process.

Only where TensorRT and a CUDA GPU exist; elsewhere these refuse with the reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _tensorrt():
    try:
        import tensorrt
    except ImportError as err:
        raise RuntimeError(
            "backend 'trt' needs the TensorRT Python package (pip install tensorrt, or the "
            "NGC container of containers/), which is not installed here"
        ) from err
    return tensorrt


def build_engine(run: dict, onnx_path: Path, out: Path) -> None:
    """Build a plan for the run's precision with one optimisation profile per input:
    min batch 1, opt the largest preferred batch, max the max batch size. The timing cache
    is kept beside the plan (timing.cache), so a rebuild on the same GPU is faster."""
    trt = _tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors}")
    triton = run["model"]["triton"]
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE,
                                 triton.get("trt_workspace_mb", 1024) << 20)
    if run["precision"] == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    cache_path = Path(out).parent / "timing.cache"
    cache = config.create_timing_cache(cache_path.read_bytes() if cache_path.is_file() else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    max_batch = triton["max_batch_size"]
    opt_batch = max(triton.get("preferred_batch_sizes", [max_batch]))
    dims = {t["name"]: t["dims"] for t in run["model"]["inputs"]}
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):  # the graph's inputs: ONNX drops unread ones
        name = network.get_input(i).name
        profile.set_shape(name, [1, *dims[name]], [opt_batch, *dims[name]],
                          [max_batch, *dims[name]])
    config.add_optimization_profile(profile)
    engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {onnx_path}")
    Path(out).write_bytes(bytes(engine))
    cache_path.write_bytes(memoryview(config.get_timing_cache().serialize()))


class EngineRunner:
    """Runs a plan in-process on CUDA tensors (TensorRT 10 name-based I/O):
    __call__(list of numpy, in the model's input order) -> list of numpy outputs."""

    def __init__(self, path: Path, input_names: list[str], output_names: list[str]):
        import torch

        trt = _tensorrt()
        self.torch = torch
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self.engine = runtime.deserialize_cuda_engine(Path(path).read_bytes())
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        is_input = {n: self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        self.inputs = [n for n in input_names if is_input.get(n)]
        self.outputs = [n for n in output_names if n in is_input]
        self.dtypes = {n: torch.from_numpy(
            np.empty(0, dtype=trt.nptype(self.engine.get_tensor_dtype(n)))).dtype
            for n in names}
        self.positions = [input_names.index(n) for n in self.inputs]

    def __call__(self, arrays):
        torch = self.torch
        stream = torch.cuda.current_stream()
        feeds = []
        for name, pos in zip(self.inputs, self.positions):
            tensor = torch.from_numpy(arrays[pos]).cuda().to(self.dtypes[name]).contiguous()
            self.context.set_input_shape(name, tuple(tensor.shape))
            self.context.set_tensor_address(name, tensor.data_ptr())
            feeds.append(tensor)  # alive until the launch is done
        results = []
        for name in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            tensor = torch.empty(shape, dtype=self.dtypes[name], device="cuda")
            self.context.set_tensor_address(name, tensor.data_ptr())
            results.append(tensor)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execution failed")
        stream.synchronize()
        return [r.float().cpu().numpy() if r.is_floating_point() else r.cpu().numpy()
                for r in results]
