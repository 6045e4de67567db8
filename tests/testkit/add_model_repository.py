"""A user's Triton model repository for `deploybench add-model`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.add_model import deploybench, mine

CONFIG = """
name: "mine"
backend: "deploybench"
max_batch_size: 16
input [{ name: "x" data_type: TYPE_FP32 dims: [4] },
       { name: "ids" data_type: TYPE_INT64 dims: [3] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [2] }]
instance_group [{ count: 1 kind: KIND_CPU }]
dynamic_batching { preferred_batch_size: [16] max_queue_delay_microseconds: 100 }
parameters { key: "runner" value { string_value: "onnxruntime" } }
parameters { key: "artifact" value { string_value: "model.onnx" } }
parameters { key: "precision" value { string_value: "fp32" } }
"""


def model_folder(root: Path, onnx: Path, config: str = CONFIG, versions=("2",),
                 name="mine") -> Path:
    """A repository of one model: `config` and the ONNX file in each version folder."""
    folder = root / name
    for version in versions:
        (folder / version).mkdir(parents=True)
        shutil.copyfile(onnx, folder / version / "model.onnx")
    (folder / "config.pbtxt").write_text(config)
    return folder


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """mine.onnx (two inputs of different dtypes, a dynamic batch), a repository serving
    it (repo/mine), and an ONNX file of other inputs."""
    import torch

    (model, x, ids), folder = mine(), tmp_path_factory.mktemp("repository")
    for name, names in (("mine.onnx", ["x", "ids"]), ("other.onnx", ["a", "b"])):
        torch.onnx.export(model, (x, ids), str(folder / name), input_names=names,
                          output_names=["y"], dynamic_axes={n: {0: "b"} for n in
                                                            [*names, "y"]}, dynamo=False)
    torch.jit.save(torch.jit.script(model), str(folder / "mine.pt"))
    batch = torch.export.Dim("batch", min=1, max=1024)
    torch.export.save(torch.export.export(model, (x, ids), dynamic_shapes=({0: batch},
                                                                           {0: batch})),
                      str(folder / "mine.pt2"))
    model_folder(folder / "repo", folder / "mine.onnx")
    return folder


def add(files: Path, name: str, path: Path, *extra) -> tuple[subprocess.CompletedProcess, Path]:
    models = files / "models"
    result = deploybench("add-model", name, path, "--models-dir", models, "--range",
                         "ids=0:10", *extra)
    return result, models / f"{name}.yaml"
