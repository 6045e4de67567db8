"""TensorRT: an ONNX model built into a plan (the convert step), and the plan run
in-process (the runner `tensorrt`). Only where TensorRT and a CUDA GPU exist; elsewhere
both refuse with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Options, Runner, RunnerUnavailable


def _tensorrt():
    try:
        import tensorrt
    except ImportError as err:
        raise RunnerUnavailable(
            "backend 'trt' needs the TensorRT Python package (pip install tensorrt, or the "
            "NGC container of containers/), which is not installed here"
        ) from err
    return tensorrt


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """A plan for the precision with one optimisation profile per input: min batch 1, opt
    `options.opt_batch_size`, max the max batch size. The timing cache is kept beside the
    plan (timing.cache), so a rebuild on the same GPU is faster."""
    trt = _tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(exported).read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {exported}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
    if options.precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    cache_path = Path(out).parent / "timing.cache"
    cache = config.create_timing_cache(cache_path.read_bytes() if cache_path.is_file() else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    dims = dict(zip(options.inputs, options.input_dims))
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):  # the graph's inputs: ONNX drops unread ones
        name_ = network.get_input(i).name
        profile.set_shape(name_, [1, *dims[name_]], [options.opt_batch_size, *dims[name_]],
                          [options.max_batch_size, *dims[name_]])
    config.add_optimization_profile(profile)
    engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {exported}")
    Path(out).write_bytes(bytes(engine))
    cache_path.write_bytes(memoryview(config.get_timing_cache().serialize()))
    return True


class EngineRunner(Runner):
    """Runs a plan on CUDA tensors (TensorRT 10 name-based I/O)."""

    def __init__(self, path: Path, options: Options):
        import torch

        trt = _tensorrt()
        self.torch = torch
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self.engine = runtime.deserialize_cuda_engine(Path(path).read_bytes())
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        is_input = {n: self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        input_names = list(options.inputs)
        self.inputs = [n for n in input_names if is_input.get(n)]
        self.outputs = [n for n in options.outputs if n in is_input]
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


def load(name: str, artifact: Path, options: Options) -> EngineRunner:
    return EngineRunner(artifact, options)
