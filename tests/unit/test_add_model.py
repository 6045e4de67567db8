"""Your own model without a plug-in (`deploybench add-model`, deploybench.models.artifact):
a small model that is none of the references' (two inputs of different dtypes, a dynamic
batch), saved by the test as ONNX, TorchScript and a torch.export package, described from
its file, refused where the file cannot tell, and measured by the real pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from deploybench.models import artifact
from deploybench.settings.resolve import settings_of
from testkit.add_model import (
    TORCHSCRIPT_INPUTS,
    add,
    deploybench,
    files,  # noqa: F401 (a fixture)
)


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
