"""Triton model configs: every config.pbtxt the pipeline writes, built and read here.

A config is built as Triton's own `ModelConfig` protobuf (from tritonclient) and written
with protobuf's text format, so a field Triton does not know cannot be written, and
`read` parses any config.pbtxt back with the same schema. A runner that compiles or
captures CUDA graphs on a batch bucket's first call gets Triton's `model_warmup` at every
bucket, so a deployed config loads warm. Also here: the load-time variants of a config
for a scenario (no dynamic batcher offline; CPU instances on a node standing in for a GPU
key), and the configs of a recommender ensemble and of Merlin HPS.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ..runners import RUNNERS, Options
from ..runners.cudagraph import buckets
from ..settings import deployments
from ..settings.deployments import Deployment
from .cpp_backend import NAME as CPP_BACKEND

# Tensors of a real Merlin HPS model (its backend's fixed names), and the recommender
# ensemble's keys that feed them (reference 003's names; deploybench.ensemble.requests).
HPS_KEYS, HPS_NUMKEYS, HPS_OUTPUT = "KEYS", "NUMKEYS", "OUTPUT0"
EMB_KEY, EMB_N_KEY = "EMB_KEY", "EMB_N_KEY"


def tensor(cls, spec: dict):
    """A ModelInput/ModelOutput of a config tensor spec (name, dtype, dims)."""
    return cls(name=spec["name"], data_type=mc.DataType.Value(f"TYPE_{spec['dtype']}"),
               dims=spec["dims"])


def instance_groups(run: dict) -> list:
    """`triton.instances` instances on the run's device kind; over several GPUs
    (`triton.gpus`), that many on each of GPUs 0..gpus-1 (those the step claimed)."""
    triton = run["model"]["triton"]
    if run["gpu"]["kind"] != "gpu":
        return [mc.ModelInstanceGroup(count=triton["instances"],
                                      kind=mc.ModelInstanceGroup.KIND_CPU)]
    gpus = deployments.gpu_count(triton)
    return [mc.ModelInstanceGroup(count=triton["instances"], kind=mc.ModelInstanceGroup.KIND_GPU,
                                  gpus=list(range(gpus)) if gpus > 1 else None)]


def dynamic_batching(run: dict) -> mc.ModelDynamicBatching | None:
    """The dynamic batcher; None for a model without a batch dimension (max_batch_size 0:
    Triton refuses a batcher there)."""
    triton = run["model"]["triton"]
    if not triton["max_batch_size"]:
        return None
    return mc.ModelDynamicBatching(preferred_batch_size=triton["preferred_batch_sizes"],
                                   max_queue_delay_microseconds=triton["max_queue_delay_us"])


# The framework backends that serve an artifact as it is, and how its tensors are read
_SERVED_AS_IT_IS = {"onnxruntime": ("ONNX graph", "onnx_signature"),
                    "tensorrt": ("TensorRT plan", "plan_signature")}


def _artifact_interface(run: dict, artifact: Path | None) -> tuple[list[dict], list[dict]]:
    """The inputs and outputs Triton's onnxruntime or tensorrt backend sees, which serves
    the graph or plan as it is: an exported graph drops inputs the model never reads (TFT's
    id), and an FP16 export gives FP16 outputs (BERT's graph, and the plan TensorRT builds
    from it); that backend refuses a config that says otherwise. An FP16 artifact's floating
    inputs are refused here: the clients send FP32."""
    model, served_by = run["model"], run["backend"]["triton_backend"]
    if artifact is None or served_by not in _SERVED_AS_IT_IS:
        return model["inputs"], model["outputs"]
    from . import signature

    what, reader = _SERVED_AS_IT_IS[served_by]
    graph_in, graph_out = getattr(signature, reader)(Path(artifact))
    inputs = [t for t in model["inputs"] if t["name"] in graph_in]
    other = [f"{t['name']} as {graph_in[t['name']][0]} (the clients send {t['dtype']})"
             for t in inputs if t["dtype"] != graph_in[t["name"]][0]]
    if other:
        raise ValueError(
            f"Triton's {served_by} backend cannot serve the {what} of "
            f"'{run['key']['model']}' as it is: it takes {', '.join(other)}; use "
            "server.serve_with: python for it")
    outputs = [{**t, "dtype": graph_out.get(t["name"], (t["dtype"],))[0]}
               for t in model["outputs"]]
    return inputs, outputs


def model_config(name: str, run: dict, triton_backend: str = "python",
                 artifact: Path | None = None,
                 deployment: Deployment | None = None) -> mc.ModelConfig:
    """The config of one run (model × gpu × backend × precision) served by
    `triton_backend` (python, the pipeline's C++ backend, or the Triton backend of the
    run's format); `artifact`, an ONNX graph or a TensorRT plan, gives the tensors its
    framework backend sees (_artifact_interface); `deployment` is one of the run's
    per-batch models."""
    if deployment is not None:
        run = {**run, "model": {**run["model"], "triton": deployments.triton_settings(
            run["model"], deployment)}}
    model = run["model"]
    # the python backend's model file and the pipeline's C++ backend take the same
    # parameters (runner, precision, artifact) and the configured tensors as they are
    ours = triton_backend in ("python", CPP_BACKEND)
    inputs, outputs = ((model["inputs"], model["outputs"]) if ours
                       else _artifact_interface(run, artifact))
    config = mc.ModelConfig(
        name=name,
        max_batch_size=model["triton"]["max_batch_size"],
        input=[tensor(mc.ModelInput, t) for t in inputs],
        output=[tensor(mc.ModelOutput, t) for t in outputs],
        instance_group=instance_groups(run),
        dynamic_batching=dynamic_batching(run),
    )
    if ours:
        config.backend = triton_backend
        runner = run["backend"]["runner"]
        params = {"artifact": run["artifact"], "runner": runner, "precision": run["precision"]}
        if runner == "torch-compile":
            params["compile_mode"] = model.get("compile_mode", "default")
        if graphs := deployments.graph_batch(run):  # either backend: the same engine's run
            params["cuda_graphs"] = str(graphs)
        if triton_backend == "python" and run["gpu"]["kind"] == "gpu" \
                and RUNNERS[runner].device_tensors:
            # inputs stay where the client put them: in GPU memory with CUDA shared memory
            params["FORCE_CPU_ONLY_INPUT_TENSORS"] = "no"
        for key, value in params.items():
            config.parameters[key].string_value = value
        if compiles_on_first_calls(runner) or "cuda_graphs" in params:
            config.model_warmup.extend(warmup(config))
    else:
        _backend_fields(config, run, triton_backend)
        if triton_backend == "tensorrt" and deployment is not None \
                and deployment.profile is not None:
            # the plan's profile fixed at this deployment's batch (runners.tensorrt.profiles)
            config.instance_group[0].profile.append(str(deployment.profile))
    return config


def compiles_on_first_calls(runner: str | None) -> bool:
    """Whether a runner compiles or captures on each batch bucket's first call: torch.compile
    and the CUDA-graph runners (named `*-cudagraph`, as the C++ backend tells them apart);
    None, no runner of ours (a repository served as it is), does not."""
    return runner == "torch-compile" or (runner or "").endswith("-cudagraph")


def warmup(config: mc.ModelConfig) -> list[mc.ModelWarmup]:
    """Zeros at every batch bucket the runners pad to (runners.cudagraph.buckets), run by
    Triton on each instance before the model is ready, so that a deployed config serves
    no request through a compile or a graph capture. Triton sends a sample of batch N as N
    requests of one in one execution, which our backends concatenate; batch 1 where the
    model has no batch dimension (Triton's rule). No samples where an input has a variable
    dimension: a sample needs a concrete shape, and one chosen here may not be the served one."""
    if any(d < 0 for t in config.input for d in t.dims):
        return []
    return [mc.ModelWarmup(
        name=f"batch_{batch}", batch_size=batch,
        inputs={t.name: mc.ModelWarmup.Input(data_type=t.data_type, dims=t.dims,
                                             zero_data=True) for t in config.input})
        for batch in buckets(config.max_batch_size) or [1]]


def _backend_fields(config: mc.ModelConfig, run: dict, triton_backend: str) -> None:
    """A format's own Triton backend: where it finds the artifact, and its accelerator."""
    config.default_model_filename = run["artifact"]
    runner = run["backend"]["runner"]
    if triton_backend == "tensorrt":
        config.platform = "tensorrt_plan"
        # CUDA graphs captured by the TensorRT backend per batch size (as the references).
        config.optimization.cuda.graphs = bool(run["model"]["triton"].get("cuda_graphs"))
        return
    if triton_backend == "tensorflow":
        config.platform = "tensorflow_savedmodel"
        if runner == "tensorflow-trt":
            _tensorrt_accelerator(config, run)
        elif run["precision"] == "fp16":  # the references' "Automatic FP16"
            accel = config.optimization.execution_accelerators.gpu_execution_accelerator.add()
            accel.name = "auto_mixed_precision"
        return
    if runner == "aoti":  # an AOTInductor package: Triton 26.03 and later
        config.platform = "torch_aoti"
        batch = run["model"]["triton"]["max_batch_size"]
        if batch > 1:
            raise ValueError(
                f"Triton's pytorch backend serves AOTInductor packages (platform torch_aoti, "
                f"26.03 and later) as a beta whose README says batch sizes above 1 are not "
                f"complete; '{run['key']['model']}' batches up to {batch}: use "
                "server.serve_with: python or deploybench for it")
    else:
        config.backend = triton_backend
    if triton_backend == "pytorch" and run["precision"] == "fp16":
        floating = [t["name"] for t in run["model"]["inputs"] if t["dtype"].startswith("FP")]
        if floating:
            # The FP16 TorchScript takes FP16 tensors; this config's clients send FP32.
            raise ValueError(
                f"Triton's pytorch backend cannot serve the FP16 TorchScript of "
                f"'{run['key']['model']}' with FP32 inputs ({', '.join(floating)}); "
                "use server.serve_with: python for it")
        for out in config.output:
            if out.data_type == mc.TYPE_FP32:
                out.data_type = mc.TYPE_FP16  # a .half() module returns FP16
    if runner == "onnxruntime-trt":
        _tensorrt_accelerator(config, run)


def _tensorrt_accelerator(config: mc.ModelConfig, run: dict) -> None:
    """The TensorRT execution accelerator (of onnxruntime or tensorflow) at the run's
    precision."""
    accel = config.optimization.execution_accelerators.gpu_execution_accelerator.add()
    accel.name = "tensorrt"
    accel.parameters["precision_mode"] = run["precision"].upper()
    accel.parameters["max_workspace_size_bytes"] = str(
        run["model"]["triton"].get("trt_workspace_mb", Options.workspace_mb) << 20)


# ---- a recommender ensemble (deploybench.ensemble) ----------------------------------

def sparse_config(name: str, run: dict, keys: list[dict], lookup: dict,
                  parameters: dict[str, str], backend: str = "python") -> mc.ModelConfig:
    """The sparse model (the python backend's, or the pipeline's C++ backend's): the `keys`
    tensors -> the `lookup` vectors, the batch inside the tensors (max_batch_size 0)."""
    config = mc.ModelConfig(
        name=name, backend=backend, max_batch_size=0,
        input=[tensor(mc.ModelInput, t) for t in keys],
        output=[tensor(mc.ModelOutput, lookup)], instance_group=instance_groups(run))
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config


def ensemble_config(name: str, inputs: list[dict], outputs: list[dict],
                    steps: list[tuple[str, dict, dict]],
                    parameters: dict[str, str]) -> mc.ModelConfig:
    """The ensemble (max_batch_size 0: one request per batch): its `inputs` and `outputs`,
    `steps` of (model, input map, output map), each map from the step model's tensor to
    the ensemble's; `parameters` for its clients."""
    config = mc.ModelConfig(
        name=name, platform="ensemble", max_batch_size=0,
        input=[tensor(mc.ModelInput, t) for t in inputs],
        output=[tensor(mc.ModelOutput, t) for t in outputs])
    for step_model, step_inputs, step_outputs in steps:
        step = config.ensemble_scheduling.step.add(model_name=step_model, model_version=-1)
        step.input_map.update(step_inputs)
        step.output_map.update(step_outputs)
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config


def hps_config(name: str, run: dict) -> mc.ModelConfig:
    """A Merlin HPS model (backend `hps`): keys of the fused table -> embedding vectors,
    one request per batch, as DLE's deployment/hps/deploy_sparse.py declares it."""
    return mc.ModelConfig(
        name=name, backend="hps", max_batch_size=0,
        input=[mc.ModelInput(name=HPS_KEYS, data_type=mc.TYPE_INT64, dims=[-1]),
               mc.ModelInput(name=HPS_NUMKEYS, data_type=mc.TYPE_INT32, dims=[-1])],
        output=[mc.ModelOutput(name=HPS_OUTPUT, data_type=mc.TYPE_FP32, dims=[-1])],
        instance_group=instance_groups(run))


# ---- reading, and the scenarios' load-time variants ---------------------------------

def write(config: mc.ModelConfig, path: Path) -> None:
    Path(path).write_text(text_format.MessageToString(config))


def read(path: Path) -> mc.ModelConfig:
    return text_format.Parse(Path(path).read_text(), mc.ModelConfig())


def served_inputs(config_pbtxt: Path) -> list[str]:
    """Names of the inputs the served config takes (clients send only these)."""
    return [t.name for t in read(config_pbtxt).input]


def served_by(config: mc.ModelConfig) -> str:
    """The Triton backend (or platform) a config names."""
    return config.backend or config.platform


def engine(config: mc.ModelConfig) -> str | None:
    """The engine a backend of ours runs the config's model with (its `runner`: torch,
    onnxruntime, embeddings, ...); None for a framework backend's model."""
    if config.backend not in ("python", CPP_BACKEND) or "runner" not in config.parameters:
        return None
    return config.parameters["runner"].string_value


def parts(config: mc.ModelConfig) -> list[str]:
    """The models an ensemble config's steps name (empty for a single model)."""
    return [s.model_name for s in config.ensemble_scheduling.step]


def scenario_config(config: mc.ModelConfig, static_batching: bool = False,
                    on_cpu: bool = False) -> mc.ModelConfig | None:
    """The config to load instead of the written one: without the dynamic batcher (the
    offline scenario), with the instances on the CPU (a CPU node standing in for a GPU
    key, allow_gpu_mismatch); None when neither."""
    if not (static_batching or on_cpu):
        return None
    loaded = mc.ModelConfig()
    loaded.CopyFrom(config)
    if static_batching:
        loaded.ClearField("dynamic_batching")
    if on_cpu:
        for group in loaded.instance_group:
            group.kind = mc.ModelInstanceGroup.KIND_CPU
    return loaded
