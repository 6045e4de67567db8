"""Your own model without a plug-in (`deploybench add-model`, deploybench.models.artifact):
a small model that is none of the references' (two inputs of different dtypes, a dynamic
batch), saved by the test as ONNX, TorchScript and a torch.export package, described from
its file, refused where the file cannot tell, and measured by the real pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import ROOT, TINY
from deploybench.models import artifact
from deploybench.settings.resolve import settings_of

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


@pytest.mark.parametrize("suffix, extra, backends, outputs", [
    ("onnx", [], ["onnx"], [{"name": "y", "dtype": "FP32", "dims": [2]}]),
    ("pt", TORCHSCRIPT_INPUTS, ["ts-script"], [{"name": "output__0", "dtype": "FP32",
                                                 "dims": [2]}]),
    ("pt2", [], ["aoti", "torch-compile"], [{"name": "output__0", "dtype": "FP32",
                                            "dims": [2]}]),
])
def test_the_config_says_what_the_file_holds(files, suffix, extra, backends, outputs):
    result, path = add(files, f"mine-{suffix}", suffix, *extra)
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(path.read_text())
    assert config["inputs"] == [{"name": "x", "dtype": "FP32", "dims": [4]},
                                {"name": "ids", "dtype": "INT64", "dims": [3]}]
    assert config["outputs"] == outputs and config["backends"] == backends
    assert config["hparams"]["sha256"] == artifact.digest(files / f"mine.{suffix}")
    assert config["triton"]["max_batch_size"] == 32
    # an open-loop answer within the default budget, at fractions of its own online peak
    assert config["rate"]["p99_budget_ms"] == 100
    assert config["rate"]["rates_of_peak"] == [0.25, 0.5, 0.75, 1.0]
    # samples generated from the specs beside it, integers within the range asked for
    with np.load(config["data"]["path"]) as samples:
        assert samples["x"].dtype == np.float32 and samples["x"].shape == (64, 4)
        assert samples["ids"].dtype == np.int64 and samples["ids"].shape == (64, 3)
        assert samples["ids"].min() >= 0 and samples["ids"].max() < 10
    assert f"deploybench run -m mine-{suffix} -g cpu -b {backends[0]} -p fp32" in result.stdout
    # the pipeline takes it as a model of its own
    run_file = files / f"run-{suffix}.yaml"
    run_file.write_text(yaml.safe_dump({"models_dir": str(files / "models")}))
    settings_of([run_file]).check_key(f"mine-{suffix}", "cpu", backends[0], "fp32")


@pytest.mark.parametrize("args, words", [
    (["mine.onnx"], ["integer input(s) ids", "--range NAME=LOW:HIGH", "--data"]),
    (["mine.pt", "--range", "ids=0:10"], ["does not say its inputs", "x, ids",
                                          "--input NAME:DTYPE:DIMS"]),
    (["mine.pt", "--range", "ids=0:10", "--input", "x:FP99:4"], ["--input 'x:FP99:4'",
                                                                  "FP32"]),
    (["static.onnx", "--range", "ids=0:10"], ["input 'x' has shape [2, 4]", "dynamic batch"]),
    (["make.txt"], ["cannot tell its format from '.txt'", ".onnx"]),
    (["mine.onnx", "--range", "ids=5:5"], ["LOW must be below HIGH"]),
    (["mine.onnx", "--range", "ids=0:10", "--p99", "0"], ["--p99 0.0", "more than 0 ms"]),
])
def test_what_the_file_cannot_tell_is_asked_for_by_name(files, args, words):
    (files / "make.txt").write_text("not a model")
    result = deploybench("add-model", "bad", *[files / a if a.startswith(("mine", "static",
                                                                          "make")) else a
                                                for a in args],
                         "--models-dir", files / "bad-models")
    assert result.returncode == 2, result.stdout
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    assert not (files / "bad-models/bad.yaml").exists()
    assert not (files / "bad-models/bad.npz").exists()


def test_a_users_samples_are_checked_and_a_changed_file_refused(files, tmp_path):
    """--data: the user's samples, refused where a dtype differs from the file's; taken as
    they are where they match. A model file changed after add-model is refused at load."""
    samples = tmp_path / "samples.npz"
    np.savez(samples, x=np.zeros((5, 4), np.float32), ids=np.zeros((5, 3), np.int32))
    result, _ = add(files, "mine-data", "onnx", "--data", samples)
    assert result.returncode == 2
    assert "tensor 'ids' is int32[3] per sample, the model config says INT64[3]" in result.stderr
    np.savez(samples, x=np.ones((5, 4), np.float32), ids=np.full((5, 3), 7, np.int64))
    result, path = add(files, "mine-data", "onnx", "--data", samples)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(path.read_text())["data"]["path"] == str(samples)
    # a file changed after it was added is refused when the pipeline loads it
    copy = tmp_path / "mine.onnx"
    copy.write_bytes((files / "mine.onnx").read_bytes())
    hparams = {"artifact": str(copy), "format": "onnx", "sha256": artifact.digest(copy)}
    assert artifact.own_export(hparams, "onnx") == copy
    copy.write_bytes(copy.read_bytes() + b"\0")
    with pytest.raises(ValueError, match="changed since it was added"):
        artifact.build_model(hparams, None, 0)


@pytest.mark.e2e
def test_an_onnx_model_is_measured_end_to_end_and_the_others_convert(files, tmp_path):
    """`deploybench run` of the ONNX model on the CPU key: the configuration's report with
    offline, online, rate (at fractions of its online peak), served/native and the accuracy
    check against the user's file; the
    TorchScript and .pt2 files through their conversion and its check."""
    for suffix, extra in (("onnx", []), ("pt", TORCHSCRIPT_INPUTS), ("pt2", [])):
        assert add(files, f"mine-{suffix}", suffix, "--force", *extra)[0].returncode == 0
    run_file = short_run(files / "models", "mine-onnx", "onnx", tmp_path / "run.yaml")
    work = ["--", "--directory", tmp_path, "--cores", "2"]
    result = deploybench("run", "-m", "mine-onnx", "-g", "cpu", "-b", "onnx", "-p", "fp32",
                         "-c", run_file, *work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = tmp_path / "results/mine-onnx/cpu/onnx_fp32"
    readme = (folder / "README.md").read_text()
    for line in ("- **Offline** (best of the batch sweep):", "- **Online** peak:",
                 "- **Served/native** at the largest batch:",
                 "- **Accuracy** against the source model: passed"):
        assert line in readme
    assert f"| Weights | the model file {files / 'mine.onnx'}" in readme
    import pandas as pd

    assert pd.read_csv(folder / "offline.csv")["Batch"].tolist() == [1, 8, 32]
    # the rates offered were the fractions of the online sweep's peak, requests of one
    online = pd.read_csv(folder / "online.csv")
    peak = online.loc[online["Stable"], "Inferences/Second"].max()
    rate = pd.read_csv(folder / "rate.csv")
    assert rate["Offered (req/s)"].tolist() == [float(f"{f * peak:.3g}")
                                                          for f in RATES_OF_PEAK]
    assert "Maximum rate with p99 within 100 ms" in readme or \
        "No rate measured kept p99 within 100 ms" in readme or \
        "Every rate measured kept p99 within 100 ms" in readme
    assert "of the online sweep's peak" in readme
    accuracy = pd.read_csv(folder / "accuracy.csv")
    assert accuracy.loc[accuracy["kind"] == "deviation", "triton"].max() < 1e-5
    # its own format exported as the file itself, byte for byte
    exported = tmp_path / "results/mine-onnx/export/onnx/model.onnx"
    assert exported.read_bytes() == (files / "mine.onnx").read_bytes()
    checks = ["results/mine-pt/cpu/ts-script_fp32/conversion_check.csv",
              "results/mine-pt2/cpu/aoti_fp32/conversion_check.csv"]
    result = deploybench("run", *checks, "-c", run_file, *work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for check in checks:
        table = pd.read_csv(tmp_path / check)
        assert table["passed"].all() and table["max_abs_error"].max() < 1e-5
