"""Triton python-backend model that serves a converted artifact (copied as model.py).

It runs inside Triton's python backend stub, so it imports only the runtime it serves
(onnxruntime or torch) and numpy, never the deploybench package. What it serves comes
from the `parameters` of config.pbtxt: `artifact` (file in the version folder),
`runtime` (onnxruntime[-trt] | torch | torch-cudagraph | tensorflow[-trt]) and
`precision` (fp32 | fp16).
Requests of one execute() call (dynamic batching) are concatenated and run as one batch.
`ArtifactRunner` is also what the pipeline uses in-process (conversion check, native
throughput), so the served and the native numbers run the same code.
"""

import json
import os
import sys
from pathlib import Path

# The stub runs Python isolated (PYTHONPATH ignored): take the pipeline's packages from
# DEPLOYBENCH_STUB_PATH, set by deploybench.triton_runtime, before importing any of them.
for _path in reversed(os.environ.get("DEPLOYBENCH_STUB_PATH", "").split(os.pathsep)):
    if _path and _path not in sys.path:
        sys.path.insert(0, _path)

import numpy as np  # noqa: E402

RUNTIMES = ("onnxruntime", "onnxruntime-trt", "torch", "torch-cudagraph", "tensorflow",
            "tensorflow-trt")

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported by the pipeline, outside Triton
    pb_utils = None


def _fp32(array):
    """FP16 outputs (an FP16 model's) as FP32, the dtype the configs declare; integer
    outputs (lengths, indices) unchanged."""
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32, copy=False)
    return array


class CudaGraphRunner:
    """Replays one CUDA graph per batch bucket (powers of two up to the max batch size):
    a batch is padded to its bucket, so any batch size the dynamic batcher forms reuses a
    captured graph, and a replay costs one launch instead of hundreds of kernel launches."""

    def __init__(self, model, max_batch_size):
        self.model = model
        self.buckets = sorted({min(2**i, max_batch_size) for i in range(32)
                               if 2 ** (i - 1) < max_batch_size})
        self.graphs = {}

    def _capture(self, bucket, example):
        import torch

        static_in = [torch.zeros((bucket, *t.shape[1:]), dtype=t.dtype, device=t.device)
                     for t in example]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm-up on a side stream, as capture requires
                self.model(*static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = self.model(*static_in)
        out = out if isinstance(out, (tuple, list)) else (out,)
        self.graphs[bucket] = (static_in, out, graph)

    def __call__(self, *tensors):
        n = tensors[0].shape[0]
        bucket = next(b for b in self.buckets if b >= n)
        if bucket not in self.graphs:
            self._capture(bucket, tensors)
        static_in, static_out, graph = self.graphs[bucket]
        for dst, src in zip(static_in, tensors):
            dst[:n].copy_(src)
        graph.replay()
        return tuple(o[:n] for o in static_out)


def _tensorflow(threads, device_id, fp16):
    """TensorFlow set up once per process: its threads, and FP16 as the seeds' "Automatic
    FP16" (grappler's auto mixed precision over the FP32 SavedModel)."""
    import tensorflow as tf

    if device_id is not None and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("this TensorFlow has no GPU support (tensorflow-cpu?); install "
                           "tensorflow[and-cuda] for a GPU instance")
    if threads:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
        except RuntimeError:  # already initialised in this process
            pass
    if fp16:
        tf.config.optimizer.set_experimental_options({"auto_mixed_precision": True})
    return tf


def _tf_trt(tf, artifact, precision, input_names):
    """The SavedModel converted by TF-TRT at load time (dynamic shapes), as a function of
    positional inputs returning the outputs in the exported order."""
    from tensorflow.python.compiler.tensorrt import trt_convert as trt

    if not tf.sysconfig.get_build_info().get("is_tensorrt_build"):
        raise RuntimeError("this TensorFlow was built without TensorRT (TF-TRT); use the "
                           "NGC TensorFlow or Triton image for backend 'tf-trt'")
    names = [n.decode() for n in tf.saved_model.load(str(artifact)).output_names.numpy()]
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(artifact), use_dynamic_shape=True,
        conversion_params=trt.TrtConversionParams(precision_mode=precision.upper()))
    function = converter.convert()

    def ordered(*tensors):
        result = function(**dict(zip(input_names, tensors)))
        return [result[n] for n in names]

    return ordered


class ArtifactRunner:
    """Loads an artifact with its runtime; __call__(list of numpy) -> list of numpy."""

    def __init__(self, artifact, runtime, precision, input_names, device_id=None,
                 threads=0, max_batch_size=1):
        self.runtime, self.input_names = runtime, list(input_names)
        self.session = None
        self.fp16 = precision == "fp16"
        self.tf_device = "/CPU:0" if device_id is None else f"/GPU:{device_id}"
        if runtime in ("torch", "torch-cudagraph"):
            import torch

            self.torch = torch
            if threads:
                torch.set_num_threads(threads)
            self.device = torch.device("cpu" if device_id is None else f"cuda:{device_id}")
            if not self.fp16:
                # FP32 means FP32: no TF32 in cuDNN convolutions/RNNs or matmuls (Ampere+
                # would otherwise round them to 10-bit mantissas).
                torch.backends.cudnn.allow_tf32 = False
                torch.backends.cuda.matmul.allow_tf32 = False
            self.model = torch.jit.load(str(artifact), map_location=self.device).eval()
            if runtime == "torch-cudagraph":
                if self.device.type != "cuda":
                    raise ValueError("runtime torch-cudagraph needs a GPU instance")
                self.model = CudaGraphRunner(self.model, max_batch_size)
        elif runtime in ("onnxruntime", "onnxruntime-trt"):
            import onnxruntime as ort

            options = ort.SessionOptions()
            if threads:
                options.intra_op_num_threads = threads
            providers = ["CPUExecutionProvider"]
            if device_id is not None:
                providers.insert(0, ("CUDAExecutionProvider", {
                    "device_id": device_id, "use_tf32": int(self.fp16)}))
            if runtime == "onnxruntime-trt":
                # The TensorRT accelerator builds engines for the subgraphs it supports, at
                # the run's precision; CUDA and CPU take the rest.
                providers.insert(0, ("TensorrtExecutionProvider", {
                    "device_id": device_id or 0, "trt_fp16_enable": self.fp16,
                    "trt_engine_cache_enable": True,
                    "trt_engine_cache_path": str(Path(artifact).parent / "ort_trt_cache"),
                }))
            self.session = ort.InferenceSession(str(artifact), options, providers=providers)
            # An exported graph drops inputs the model never reads (TFT's id): skip those.
            self.session_inputs = {i.name: i.type for i in self.session.get_inputs()}
        elif runtime == "tensorflow":
            self.tf = _tensorflow(threads, device_id, self.fp16)
            with self.tf.device(self.tf_device):
                self.loaded = self.tf.saved_model.load(str(artifact))  # owns the variables
            self.model = self.loaded.ordered
        elif runtime == "tensorflow-trt":
            self.tf = _tensorflow(threads, device_id, fp16=False)
            self.model = _tf_trt(self.tf, artifact, precision, self.input_names)
        else:
            raise ValueError(f"unknown runtime '{runtime}'; valid: {', '.join(RUNTIMES)}")

    def __call__(self, arrays):
        if self.session is not None:
            feed = {}
            for name, array in zip(self.input_names, arrays):
                if name in self.session_inputs:
                    half = self.session_inputs[name] == "tensor(float16)"
                    feed[name] = array.astype(np.float16) if half else array
            return [_fp32(np.asarray(o)) for o in self.session.run(None, feed)]
        if self.runtime.startswith("tensorflow"):
            with self.tf.device(self.tf_device):
                result = self.model(*[self.tf.constant(a) for a in arrays])
            return [_fp32(r.numpy()) for r in result]
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
            return [_fp32(r.cpu().numpy()) for r in result]


class TritonPythonModel:
    def initialize(self, args):
        if int(np.__version__.split(".")[0]) >= 2:
            # Seen with Triton 2.51's stub: numpy 2 responses carry empty output tensors.
            raise pb_utils.TritonModelException(
                f"numpy {np.__version__} in the python backend stub: Triton 2.51 returns "
                "empty outputs with numpy 2; set DEPLOYBENCH_SERVER_PYTHONPATH to a folder "
                "with numpy<2 (scripts/offline_run.sh does)"
            )
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.inputs = [t["name"] for t in config["input"]]
        self.outputs = [t["name"] for t in config["output"]]
        self.output_dtypes = [
            pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]
        ]
        on_gpu = args["model_instance_kind"] == "GPU"
        # CPU instances share the cores evenly, so that two instances do not oversubscribe.
        cpu_instances = sum(g["count"] for g in config["instance_group"] if g["kind"] == "KIND_CPU")
        self.runner = ArtifactRunner(
            Path(args["model_repository"]) / args["model_version"] / params["artifact"],
            params["runtime"], params.get("precision", "fp32"), self.inputs,
            device_id=int(args["model_instance_device_id"]) if on_gpu else None,
            threads=0 if on_gpu else max(1, (os.cpu_count() or 1) // max(1, cpu_instances)),
            max_batch_size=max(1, config.get("max_batch_size", 1)),
        )

    def execute(self, requests):
        per_request = [
            [pb_utils.get_input_tensor_by_name(r, name).as_numpy() for name in self.inputs]
            for r in requests
        ]
        sizes = [arrays[0].shape[0] for arrays in per_request]
        batch = [p[0] if len(p) == 1 else np.concatenate(p) for p in zip(*per_request)]
        outputs = self.runner(batch)
        responses, start = [], 0
        for size in sizes:
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(out[start : start + size], dtype=dtype))
                for name, out, dtype in zip(self.outputs, outputs, self.output_dtypes)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses
