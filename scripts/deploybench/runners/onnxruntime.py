"""ONNX Runtime: the runners `onnxruntime` (CUDA on a GPU, else CPU) and
`onnxruntime-trt` (its TensorRT execution provider first)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Options, Runner, RunnerUnavailable, as_fp32


def convert(name: str, exported: Path, out: Path, options: Options) -> bool:
    """FP16 for plain ONNX Runtime: the graph's weights and arithmetic in FP16, its inputs
    and outputs kept FP32, index arithmetic kept FP32 (integer_casts). The TensorRT provider
    applies FP16 itself at load time."""
    if options.precision == "fp32" or name == "onnxruntime-trt":
        return False
    import onnx
    from onnxconverter_common import float16

    model = onnx.load(str(exported))
    model = float16.convert_float_to_float16(model, keep_io_types=True,
                                             node_block_list=integer_casts(model))
    onnx.save(model, str(out))
    return True


COMPARISONS = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"}


def integer_casts(model) -> list[str]:
    """The nodes that cast integers to FP32 and the comparisons that read them: tf2onnx
    writes a Keras model's id arithmetic so (Wide & Deep's FloorMod: ids cast, compared with
    0). Converted, such a Cast kept its FP32 target while its output was retyped FP16, a graph
    ONNX Runtime refuses (2026-11-29), and ids past 2,048 do not survive FP16 anyway."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in
             (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output)}
    types.update({t.name: t.data_type for t in inferred.graph.initializer})
    floating = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                onnx.TensorProto.BFLOAT16}
    casts = {n.output[0]: n.name for n in model.graph.node
             if n.op_type == "Cast" and n.name
             and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in n.attribute)
             and types.get(n.input[0]) not in (*floating, None)}
    readers = [n.name for n in model.graph.node
               if n.op_type in COMPARISONS and n.name and set(n.input) & set(casts)]
    return [*casts.values(), *readers]


class OnnxRuntimeRunner(Runner):
    def __init__(self, name: str, artifact: Path, options: Options):
        import onnxruntime as ort

        device_id, fp16 = options.device_id, options.precision == "fp16"
        if device_id is not None:
            wanted = ("TensorrtExecutionProvider" if name == "onnxruntime-trt"
                      else "CUDAExecutionProvider")
            if wanted not in ort.get_available_providers():
                raise RunnerUnavailable(
                    f"onnxruntime {ort.__version__} here has no {wanted} (install "
                    "onnxruntime-gpu" + (" and TensorRT" if name == "onnxruntime-trt" else "")
                    + f"; an offline machine: docs/gpus.md) for runner '{name}' on a GPU")
            # torch's import loads the CUDA and cuDNN libraries of its nvidia-* wheels, which
            # the CUDA provider links (ONNX Runtime's advice where their CUDA majors agree)
            import torch  # noqa: F401
        session_options = ort.SessionOptions()
        if options.threads:
            session_options.intra_op_num_threads = options.threads
        providers = ["CPUExecutionProvider"]
        self.graphs = self.stream = self.run_options = None
        if device_id is not None:
            cuda = {"device_id": device_id, "use_tf32": int(fp16)}
            if options.cuda_graphs:  # ONNX Runtime on a stream of ours, which a graph captures
                import torch

                self.stream = torch.cuda.Stream(f"cuda:{device_id}")
                cuda["user_compute_stream"] = str(self.stream.cuda_stream)
            providers.insert(0, ("CUDAExecutionProvider", cuda))
        if name == "onnxruntime-trt":
            # The TensorRT accelerator builds engines for the subgraphs it supports, at
            # the run's precision; CUDA and CPU take the rest.
            providers.insert(0, ("TensorrtExecutionProvider", {
                "device_id": device_id or 0, "trt_fp16_enable": fp16,
                "trt_engine_cache_enable": True,
                "trt_engine_cache_path": str(Path(artifact).parent / "ort_trt_cache"),
            }))
        self.session = ort.InferenceSession(str(artifact), session_options,
                                            providers=providers)
        # A provider that fails to load (a CUDA library missing) leaves its work to the CPU
        # with only a logged error: a GPU number must not come from the CPU.
        if device_id is not None and self.session.get_providers()[0] != providers[0][0]:
            raise RunnerUnavailable(
                f"onnxruntime {ort.__version__} did not load {providers[0][0]} for runner "
                f"'{name}' (it runs {self.session.get_providers()}): its CUDA libraries are "
                "missing or of another CUDA version; the server log says which")
        self.input_names = list(options.inputs)
        # An exported graph drops inputs the model never reads (TFT's id): skip those.
        self.session_inputs = {i.name: i.type for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.session_outputs = {o.name: o.type for o in self.session.get_outputs()}
        # each output's per-sample dims where the config gives them (None: unknown)
        dims = dict(zip(options.outputs, options.output_dims))
        self.output_dims = [tuple(dims[n]) if n in dims else None for n in self.output_names]
        if device_id is not None:  # device tensors in and out (run_tensors), through torch
            import torch

            self.torch, self.device = torch, torch.device(f"cuda:{device_id}")
        if self.stream is not None:
            # its work is ordered on our stream: no wait of its own at the run's end (which a
            # capture refuses); graphs where they pay, as the C++ backend's engine has them
            from .cudagraph import CudaGraphs

            self.run_options = ort.RunOptions()
            self.run_options.add_run_config_entry("disable_synchronize_execution_providers", "1")
            self.graphs = CudaGraphs(lambda *t: self._run_bound(t), options.cuda_graphs,
                                     stream=self.stream, where_faster=True)

    def to_device(self, tensors: list) -> list:
        return [t.to(self.device, non_blocking=True) for t in tensors]

    def run_tensors(self, tensors: list) -> list:
        """Torch tensors on the runner's GPU in, its outputs there out (FP32 for floating
        ones, owned by the caller), bound in place (ONNX Runtime's I/O binding): no host copy
        either way. With CUDA graphs, run on the runner's stream, ordered after the caller's
        work and before what the caller does next."""
        if self.graphs is None:
            made = self._run_bound(tensors)
        else:
            caller = self.torch.cuda.current_stream(self.device)
            self.stream.wait_stream(caller)
            with self.torch.cuda.stream(self.stream):
                made = self.graphs(*tensors)
                out = [m.float() if m.is_floating_point() else m for m in made]
                out = [o.clone() if o is m else o for o, m in zip(out, made)]  # a graph's own
            caller.wait_stream(self.stream)
            return out
        return [o.float() if o.is_floating_point() else o for o in made]

    def _run_bound(self, tensors) -> list:
        """One run over the tensors (ONNX Runtime's own output types); on the runner's
        stream where it has one, else synchronised with the current stream."""
        torch = self.torch
        binding = self.session.io_binding()
        kept = []
        for name, tensor in zip(self.input_names, tensors):
            if name not in self.session_inputs:
                continue
            wanted = torch.float16 if self.session_inputs[name] == "tensor(float16)" else None
            tensor = tensor.to(self.device, wanted or tensor.dtype).contiguous()
            kept.append(tensor)
            binding.bind_input(name, "cuda", self.device.index,
                               _numpy_dtype(torch, tensor.dtype), list(tensor.shape),
                               tensor.data_ptr())
        # outputs of a known shape into tensors made here; the others where ONNX Runtime
        # puts them (handed over through DLPack)
        batch, made = len(tensors[0]), []
        floating = {"tensor(float16)": torch.float16, "tensor(float)": torch.float32}
        for name, dims in zip(self.output_names, self.output_dims):
            dtype = floating.get(self.session_outputs[name])
            if dims is None or any(d < 0 for d in dims) or dtype is None:
                binding.bind_output(name, "cuda", self.device.index)
                made.append(None)
                continue
            out = torch.empty((batch, *dims), dtype=dtype, device=self.device)
            binding.bind_output(name, "cuda", self.device.index, _numpy_dtype(torch, dtype),
                                list(out.shape), out.data_ptr())
            made.append(out)
        if self.stream is None:  # ONNX Runtime's own stream: the inputs written first
            torch.cuda.current_stream(self.device).synchronize()
        self.session.run_with_iobinding(binding, self.run_options)
        if any(m is None for m in made):
            bound = binding.get_outputs()
            made = [m if m is not None else torch.from_dlpack(bound[i])
                    for i, m in enumerate(made)]
        return made

    def __call__(self, arrays):
        feed = {}
        for name, array in zip(self.input_names, arrays):
            if name in self.session_inputs:
                half = self.session_inputs[name] == "tensor(float16)"
                feed[name] = array.astype(np.float16) if half else array
        return [as_fp32(np.asarray(o)) for o in self.session.run(None, feed)]


def _numpy_dtype(torch, dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


def load(name: str, artifact: Path, options: Options) -> OnnxRuntimeRunner:
    return OnnxRuntimeRunner(name, artifact, options)
