"""Generate a Triton model repository: config.pbtxt, version folder, served artifact.

The config is built as Triton's own `ModelConfig` protobuf (from tritonclient) and
written with protobuf's text format, so a field Triton does not know cannot be
written, and `read_config` parses any config.pbtxt back with the same schema.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

PYTHON_MODEL = Path(__file__).with_name("triton_python_model.py")
VERSION = "1"


def _tensor(cls, spec: dict):
    return cls(name=spec["name"], data_type=mc.DataType.Value(f"TYPE_{spec['dtype']}"),
               dims=spec["dims"])


def build_config(name: str, run: dict) -> mc.ModelConfig:
    """The python-backend config of one run (model × gpu × backend × precision)."""
    model, triton = run["model"], run["model"]["triton"]
    on_gpu = run["gpu"]["kind"] == "gpu"
    config = mc.ModelConfig(
        name=name,
        backend="python",
        max_batch_size=triton["max_batch_size"],
        input=[_tensor(mc.ModelInput, t) for t in model["inputs"]],
        output=[_tensor(mc.ModelOutput, t) for t in model["outputs"]],
        instance_group=[
            mc.ModelInstanceGroup(
                count=triton["instances"],
                kind=mc.ModelInstanceGroup.KIND_GPU if on_gpu else mc.ModelInstanceGroup.KIND_CPU,
            )
        ],
        dynamic_batching=mc.ModelDynamicBatching(
            preferred_batch_size=triton["preferred_batch_sizes"],
            max_queue_delay_microseconds=triton["max_queue_delay_us"],
        ),
    )
    params = {
        "artifact": run["artifact"],
        "runtime": run["backend"]["runtime"],
        "precision": run["precision"],
    }
    for key, value in params.items():
        config.parameters[key].string_value = value
    return config


def write_config(config: mc.ModelConfig, path: Path) -> None:
    path.write_text(text_format.MessageToString(config))


def read_config(path: Path) -> mc.ModelConfig:
    return text_format.Parse(Path(path).read_text(), mc.ModelConfig())


def static_batching_override(config: mc.ModelConfig) -> dict:
    """The load-time config of the offline scenario: the same model, no dynamic batcher."""
    from google.protobuf import json_format

    static = mc.ModelConfig()
    static.CopyFrom(config)
    static.ClearField("dynamic_batching")
    return json_format.MessageToDict(static, preserving_proto_field_name=True)


def create(run: dict, artifact: Path, out_config: Path) -> None:
    """Write `<repo>/<name>/config.pbtxt` and `<repo>/<name>/1/{model.py,artifact}`."""
    model_dir = out_config.parent
    version_dir = model_dir / VERSION
    version_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PYTHON_MODEL, version_dir / "model.py")
    shutil.copyfile(artifact, version_dir / run["artifact"])
    write_config(build_config(model_dir.name, run), out_config)
