"""Generate a Triton model repository: config.pbtxt, version folder, served artifact.

The config is built as Triton's own `ModelConfig` protobuf (from tritonclient) and
written with protobuf's text format, so a field Triton does not know cannot be
written, and `read_config` parses any config.pbtxt back with the same schema.

Who serves a build: the Triton backend native to its format (onnxruntime, tensorrt,
pytorch, tensorflow) when the server's backend directory has it, else the python backend running
`triton_python_model.py` over the same artifact (the embedded server has only that one).
`server.serve_with` (auto | native | python) overrides the choice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from .convert import copy_artifact

PYTHON_MODEL = Path(__file__).with_name("triton_python_model.py")
VERSION = "1"


def tensor(cls, spec: dict):
    """A ModelInput/ModelOutput of a config tensor spec (name, dtype, dims)."""
    return cls(name=spec["name"], data_type=mc.DataType.Value(f"TYPE_{spec['dtype']}"),
               dims=spec["dims"])


def instance_groups(run: dict) -> list:
    """`triton.instances` instances on the run's device kind."""
    kind = (mc.ModelInstanceGroup.KIND_GPU if run["gpu"]["kind"] == "gpu"
            else mc.ModelInstanceGroup.KIND_CPU)
    return [mc.ModelInstanceGroup(count=run["model"]["triton"]["instances"], kind=kind)]


def dynamic_batching(run: dict) -> mc.ModelDynamicBatching:
    triton = run["model"]["triton"]
    return mc.ModelDynamicBatching(preferred_batch_size=triton["preferred_batch_sizes"],
                                   max_queue_delay_microseconds=triton["max_queue_delay_us"])


def served_by(run: dict, available: list[str]) -> str:
    """The Triton backend that serves this run: its native one or `python`, given the
    backends the server has (`available`) and `server.serve_with`."""
    native, choice = run["backend"]["native"], run["server"].get("serve_with", "auto")
    if choice == "python":
        return "python"
    if native and native in available:
        return native
    if choice == "native":
        why = (f"backend '{run['key']['backend']}' has no native Triton backend" if not native
               else f"the server's backend directory has no '{native}' backend "
                    f"(it has: {', '.join(sorted(available)) or 'none'})")
        raise ValueError(f"server.serve_with is 'native' but {why}; use serve_with: auto "
                         "or python")
    if "python" not in available:
        raise ValueError(f"the server has neither the '{native}' nor the python backend "
                         f"(it has: {', '.join(sorted(available)) or 'none'})")
    return "python"


def _native_inputs(run: dict, artifact: Path | None) -> list[dict]:
    """The inputs a native backend sees: an exported ONNX graph drops inputs the model
    never reads (TFT's id), and onnxruntime refuses a config that lists them."""
    inputs = run["model"]["inputs"]
    if artifact is None or run["backend"]["native"] != "onnxruntime":
        return inputs
    import onnx

    graph = onnx.load(str(artifact), load_external_data=False).graph
    kept = {i.name for i in graph.input} - {t.name for t in graph.initializer}
    return [t for t in inputs if t["name"] in kept]


def build_config(name: str, run: dict, backend: str = "python",
                 artifact: Path | None = None) -> mc.ModelConfig:
    """The config of one run (model × gpu × backend × precision) served by `backend`
    (python or the run's native Triton backend); `artifact` narrows ONNX inputs."""
    model = run["model"]
    inputs = model["inputs"] if backend == "python" else _native_inputs(run, artifact)
    config = mc.ModelConfig(
        name=name,
        max_batch_size=model["triton"]["max_batch_size"],
        input=[tensor(mc.ModelInput, t) for t in inputs],
        output=[tensor(mc.ModelOutput, t) for t in model["outputs"]],
        instance_group=instance_groups(run),
        dynamic_batching=dynamic_batching(run),
    )
    if backend == "python":
        config.backend = "python"
        params = {"artifact": run["artifact"], "runtime": run["backend"]["runtime"],
                  "precision": run["precision"]}
        for key, value in params.items():
            config.parameters[key].string_value = value
    else:
        _native(config, run, backend)
    return config


def _native(config: mc.ModelConfig, run: dict, backend: str) -> None:
    """The native backend's fields: where it finds the artifact, and its accelerator."""
    config.default_model_filename = run["artifact"]
    if backend == "tensorrt":
        config.platform = "tensorrt_plan"
        # CUDA graphs captured by the TensorRT backend per batch size (as in the seeds).
        config.optimization.cuda.graphs = bool(run["model"]["triton"].get("cuda_graphs"))
        return
    if backend == "tensorflow":
        config.platform = "tensorflow_savedmodel"
        if run["backend"]["runtime"] == "tensorflow-trt":
            _tensorrt_accelerator(config, run)
        elif run["precision"] == "fp16":  # the seeds' "Automatic FP16"
            accel = config.optimization.execution_accelerators.gpu_execution_accelerator.add()
            accel.name = "auto_mixed_precision"
        return
    config.backend = backend
    if backend == "pytorch" and run["precision"] == "fp16":
        floating = [t["name"] for t in run["model"]["inputs"] if t["dtype"].startswith("FP")]
        if floating:
            # The FP16 TorchScript takes FP16 tensors; this config's clients send FP32.
            raise ValueError(
                f"the native pytorch backend cannot serve the FP16 TorchScript of "
                f"'{run['key']['model']}' with FP32 inputs ({', '.join(floating)}); "
                "use server.serve_with: python for it")
        for out in config.output:
            if out.data_type == mc.TYPE_FP32:
                out.data_type = mc.TYPE_FP16  # a .half() module returns FP16
    if run["backend"]["runtime"] == "onnxruntime-trt":
        _tensorrt_accelerator(config, run)


def _tensorrt_accelerator(config: mc.ModelConfig, run: dict) -> None:
    """The TensorRT execution accelerator (of onnxruntime or tensorflow) at the run's
    precision."""
    accel = config.optimization.execution_accelerators.gpu_execution_accelerator.add()
    accel.name = "tensorrt"
    accel.parameters["precision_mode"] = run["precision"].upper()
    accel.parameters["max_workspace_size_bytes"] = str(
        run["model"]["triton"].get("trt_workspace_mb", 1024) << 20)


def write_config(config: mc.ModelConfig, path: Path) -> None:
    path.write_text(text_format.MessageToString(config))


def read_config(path: Path) -> mc.ModelConfig:
    return text_format.Parse(Path(path).read_text(), mc.ModelConfig())


def static_batching_override(config: mc.ModelConfig) -> dict:
    """The load-time config of the offline scenario: the same model, no dynamic batcher."""
    return load_override(config, static_batching=True)


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


def load_override(config: mc.ModelConfig, static_batching: bool = False,
                  on_cpu: bool = False) -> dict | None:
    """scenario_config as the JSON that Triton's load API takes."""
    from google.protobuf import json_format

    loaded = scenario_config(config, static_batching, on_cpu)
    if loaded is None:
        return None
    return json_format.MessageToDict(loaded, preserving_proto_field_name=True)


def scenario_repository(src: Path, dst: Path, static_batching: bool,
                        on_cpu: bool) -> Path:
    """`dst`: the repository `src` with every model's scenario_config and links to the
    rest of its files. An ensemble needs it: loading one (re)loads its parts from the
    repository, so load-time overrides of the parts would be lost."""
    for model_dir in sorted(p for p in Path(src).iterdir() if (p / "config.pbtxt").is_file()):
        out = Path(dst) / model_dir.name
        out.mkdir(parents=True)
        for item in model_dir.iterdir():
            if item.name != "config.pbtxt":
                (out / item.name).symlink_to(item.resolve())
        config = read_config(model_dir / "config.pbtxt")
        write_config(scenario_config(config, static_batching, on_cpu) or config,
                     out / "config.pbtxt")
    return Path(dst)


def create(run: dict, artifact: Path, out_config: Path, available: list[str]) -> str:
    """Write `<repo>/<name>/config.pbtxt` and `<repo>/<name>/1/<artifact>` (plus model.py
    for the python backend), for the server whose backends are `available`; returns the
    Triton backend that serves it. An ensemble (hps-*) writes its parts beside it."""
    if run["backend"].get("dense"):
        from .ensemble import create_repository

        return create_repository(run, artifact, out_config, available)
    backend = served_by(run, available)
    model_dir = out_config.parent
    version_dir = model_dir / VERSION
    version_dir.mkdir(parents=True, exist_ok=True)
    if backend == "python":
        shutil.copyfile(PYTHON_MODEL, version_dir / "model.py")
    copy_artifact(artifact, version_dir / run["artifact"])
    write_config(build_config(model_dir.name, run, backend, artifact), out_config)
    return backend


def served_inputs(config_pbtxt: Path) -> list[str]:
    """Names of the inputs the served config takes (clients send only these)."""
    return [t.name for t in read_config(config_pbtxt).input]
