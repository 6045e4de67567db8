"""A user's model files for `deploybench add-model`, the command itself, and a short run's
settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testkit.workflow import ROOT, TINY

BIN = Path(sys.executable).parent
RATES_OF_PEAK = [0.25, 0.5]
TORCHSCRIPT_INPUTS = ["--input", "x:FP32:4", "--input", "ids:INT64:3"]


def deploybench(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "deploybench"), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


def mine():
    """A user's model of two inputs of different dtypes (seeded), and an example of each."""
    import torch

    class Mine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x, ids):
            return self.lin(x + self.emb(ids).sum(1))

    torch.manual_seed(0)
    model = Mine().eval()
    return model, torch.randn(2, 4), torch.randint(0, 10, (2, 3))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The model in the three formats, and its own outputs on known inputs."""
    import torch

    (model, x, ids), folder = mine(), tmp_path_factory.mktemp("mine")
    torch.onnx.export(model, (x, ids), str(folder / "mine.onnx"), input_names=["x", "ids"],
                      output_names=["y"], dynamo=False,
                      dynamic_axes={"x": {0: "b"}, "ids": {0: "b"}, "y": {0: "b"}})
    torch.jit.save(torch.jit.script(model), str(folder / "mine.pt"))
    batch = torch.export.Dim("batch", min=1, max=1024)
    torch.export.save(torch.export.export(model, (x, ids), dynamic_shapes=({0: batch},
                                                                           {0: batch})),
                      str(folder / "mine.pt2"))
    torch.onnx.export(model, (x, ids), str(folder / "static.onnx"), input_names=["x", "ids"],
                      output_names=["y"], dynamo=False)  # no dynamic batch
    return folder


def add(files: Path, name: str, suffix: str, *extra) -> tuple[subprocess.CompletedProcess, Path]:
    models = files / "models"
    result = deploybench("add-model", name, files / f"mine.{suffix}", "--models-dir", models,
                         "--range", "ids=0:10", *extra)
    return result, models / f"{name}.yaml"


def short_run(models: Path, model: str, backend: str, run_file: Path) -> Path:
    """A user's model measured as the tiny models are (tests/config/tiny.yaml's windows and
    native time: a level of three windows 0.75 s, not 6), its rate scenario as written
    made short: two levels below its online peak, where both finish (a level beyond the
    peak waits out its timeout; test_rate holds that case)."""
    path = models / f"{model}.yaml"
    config = yaml.safe_load(path.read_text())
    config["rate"].update(rates_of_peak=RATES_OF_PEAK, bisection_steps=0, min_requests=60,
                          level_timeout_s=30)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    tiny = yaml.safe_load(TINY.read_text())
    run_file.write_text(yaml.safe_dump({
        "models_dir": str(models), "matrix": {"models": [model]},
        "targets": [{"model": model, "gpu": "cpu", "backend": backend, "precision": "fp32"}],
        **{key: tiny[key] for key in ("perf", "perf_overrides", "native")}}))
    return run_file
