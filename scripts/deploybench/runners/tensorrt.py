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


# TensorRT's data types (DataType names) as Triton names them
TRITON_TYPES = {"FLOAT": "FP32", "HALF": "FP16", "BF16": "BF16", "INT8": "INT8",
                "INT32": "INT32", "INT64": "INT64", "BOOL": "BOOL", "UINT8": "UINT8"}


def plan_tensors(path: Path) -> tuple[dict, dict]:
    """A plan's input and output bindings as Triton's tensorrt backend reads them when it
    loads the plan: name -> (Triton data type, dims with the batch, -1 where dynamic)."""
    trt = _tensorrt()
    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    engine = runtime.deserialize_cuda_engine(Path(path).read_bytes())
    if engine is None:
        raise RuntimeError(f"TensorRT could not deserialize the plan {path}")
    inputs, outputs = {}, {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        dtype = engine.get_tensor_dtype(name).name
        side = inputs if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs
        side[name] = (TRITON_TYPES.get(dtype, f"TensorRT type {dtype}"),
                      [int(d) for d in engine.get_tensor_shape(name)])
    return inputs, outputs


def profiles(options: Options) -> list[tuple[int, int, int]]:
    """The plan's optimisation profiles as (min, opt, max) batch sizes: one from 1 through
    `opt_batch_size` to the max batch size, or one fixed at each of `fixed_batches` (reference
    004's per-batch engines: min = opt = max), profile i serving deployment i."""
    if options.fixed_batches:
        return [(b, b, b) for b in options.fixed_batches]
    return [(1, options.opt_batch_size, options.max_batch_size)]


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """A plan for the precision with the optimisation `profiles` on every input. The
    timing cache is kept beside the plan (timing.cache), so a rebuild on the same GPU is
    faster."""
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
    for batches in profiles(options):
        profile = builder.create_optimization_profile()
        for i in range(network.num_inputs):  # the graph's inputs: ONNX drops unread ones
            name_ = network.get_input(i).name
            profile.set_shape(name_, *([b, *dims[name_]] for b in batches))
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
        # each profile's (min, max) batch; a fixed-shape profile takes a smaller batch padded
        self.ranges = [tuple(self.engine.get_tensor_profile_shape(self.inputs[0], p)[k][0]
                             for k in (0, 2))
                       for p in range(self.engine.num_optimization_profiles)]
        self.profile = 0

    def _profile_for(self, batch: int) -> tuple[int, int]:
        """The first profile whose max batch takes `batch`, and the batch it runs (the
        profile's min where that is larger: the inputs are padded to it)."""
        for index, (low, high) in enumerate(self.ranges):
            if batch <= high:
                return index, max(batch, low)
        raise ValueError(f"batch {batch} exceeds the plan's profiles {self.ranges}")

    def __call__(self, arrays):
        torch = self.torch
        stream = torch.cuda.current_stream()
        batch = len(arrays[self.positions[0]])
        index, padded = self._profile_for(batch)
        if index != self.profile:
            self.context.set_optimization_profile_async(index, stream.cuda_stream)
            self.profile = index
        feeds = []
        for name, pos in zip(self.inputs, self.positions):
            array = arrays[pos]
            if padded > batch:  # repeat the last sample; its outputs are dropped below
                array = np.concatenate([array, np.repeat(array[-1:], padded - batch, 0)])
            tensor = torch.from_numpy(array).cuda().to(self.dtypes[name]).contiguous()
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
        return [(r.float() if r.is_floating_point() else r)[:batch].cpu().numpy()
                for r in results]


def load(name: str, artifact: Path, options: Options) -> EngineRunner:
    return EngineRunner(artifact, options)
