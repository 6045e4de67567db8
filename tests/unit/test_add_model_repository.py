"""A Triton model repository as your own model (`deploybench add-model`): a model folder the
test writes itself (the pipeline's C++ backend serving an ONNX file, a version folder of
its own number), described from its config.pbtxt, refused where it cannot be measured as it
is, planned without the steps it has not (conversion, native; accuracy without a source
model), and measured as it is by the real Triton and perf_analyzer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from deploybench.models import artifact
from deploybench.triton import config as triton_config
from deploybench.triton import repository as triton_repository
from testkit.add_model import deploybench
from testkit.add_model_repository import (
    CONFIG,
    add,
    files,  # noqa: F401 (a fixture)
    model_folder,
)

INPUTS = [{"name": "x", "dtype": "FP32", "dims": [4]},
          {"name": "ids", "dtype": "INT64", "dims": [3]}]


def test_the_config_says_what_the_repository_serves(files):
    """Its tensors and Triton settings from config.pbtxt, its served version, who serves
    it, the backend key `repository`, and its source model checked against its tensors."""
    result, path = add(files, "mine-repo", files / "repo", "--source", files / "mine.onnx")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(path.read_text())
    assert config["inputs"] == INPUTS
    assert config["outputs"] == [{"name": "y", "dtype": "FP32", "dims": [2]}]
    assert config["backends"] == ["repository"]
    assert config["triton"] == {"max_batch_size": 16, "instances": 1,
                                "preferred_batch_sizes": [16], "max_queue_delay_us": 100}
    assert config["offline"]["batch_sizes"] == [1, 4, 16]
    hparams = config["hparams"]
    assert (hparams["artifact"], hparams["served_by"], hparams["version"]) == (
        str(files / "repo/mine"), "deploybench", "2")
    assert hparams["sha256"] == artifact.digest(files / "repo/mine")
    assert hparams["source"] == {"artifact": str(files / "mine.onnx"), "format": "onnx",
                                 "sha256": artifact.digest(files / "mine.onnx")}
    assert "accuracy" in config
    assert "served as it is by Triton's 'deploybench' backend (version 2)" in result.stdout
    # without a source: no accuracy section, the reason said
    result, path = add(files, "bare-repo", files / "repo/mine")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(path.read_text())
    assert config["hparams"]["source"] is None and "accuracy" not in config
    assert "accuracy not measured: no --source model" in result.stdout


PYTHON = CONFIG.replace('backend: "deploybench"', 'backend: "python"')


@pytest.mark.parametrize("config, versions, extra, words", [
    (PYTHON, ("1",), [], ["served by Triton's python backend", "model.py is Python",
                          "--trust-python"]),
    (CONFIG.replace("max_batch_size: 16", "max_batch_size: 0"), ("1",), [],
     ["max_batch_size 0", "max_batch_size 1 or more"]),
    (CONFIG + "version_policy { all {} }", ("1", "2"), [],
     ["serves 2 versions (1, 2)", "set its version_policy"]),
    (CONFIG.replace("input [", "input [{ name: \"s\" data_type: TYPE_STRING dims: [1] },"),
     ("1",), [], ["input 's' is STRING", "valid: BOOL"]),
    (CONFIG, ("1",), ["--source", "other.onnx"],
     ["--source", "has inputs a FP32[4], b INT64[3]", "config has x FP32[4], ids INT64[3]"]),
    ("platform: \"ensemble\"\nmax_batch_size: 8", ("1",), [], ["is an ensemble"]),
    ("max_batch_size: [", ("1",), [], ["is not a Triton model config"]),
])
def test_what_cannot_be_measured_as_it_is_is_refused(files, tmp_path, config, versions,
                                                     extra, words):
    folder = model_folder(tmp_path / "repo", files / "mine.onnx", config, versions)
    extra = [files / e if e.endswith(".onnx") else e for e in extra]
    result, path = add(tmp_path, "bad", folder, *extra)
    assert result.returncode == 2, result.stdout
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    assert not path.exists() and not path.with_suffix(".npz").exists()


def test_a_python_model_is_taken_when_trusted_and_a_repository_of_two_refused(files,
                                                                             tmp_path):
    model_folder(tmp_path / "repo", files / "mine.onnx", PYTHON, ("1",))
    result, path = add(tmp_path, "py", tmp_path / "repo", "--trust-python")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(path.read_text())["hparams"]["served_by"] == "python"
    model_folder(tmp_path / "repo", files / "mine.onnx", CONFIG, ("1",), name="other")
    result, _ = add(tmp_path, "two", tmp_path / "repo")
    assert result.returncode == 2
    assert "holds 2 models (mine, other): name the one to add" in result.stderr


@pytest.mark.parametrize("source, fmt", [("mine.pt", "torchscript"), ("mine.pt2", "pt2")])
def test_a_source_that_does_not_name_its_tensors_is_taken_in_order(files, source, fmt):
    """A TorchScript or .pt2 source is matched to the config's tensors in order, and run
    in-process with the config's inputs in that order: the ONNX file's outputs."""
    import numpy as np
    import onnxruntime as ort
    import torch

    result, path = add(files, f"src-{fmt}", files / "repo", "--source", files / source)
    assert result.returncode == 0, result.stderr
    hparams = yaml.safe_load(path.read_text())["hparams"]
    assert hparams["source"]["format"] == fmt
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    ids = np.random.default_rng(2).integers(0, 10, (5, 3))
    with torch.inference_mode():
        got = artifact.build_model(hparams, None, 0)(torch.from_numpy(x), torch.from_numpy(ids))
    got = got[0] if isinstance(got, (tuple, list)) else got
    want = ort.InferenceSession(str(files / "mine.onnx")).run(None, {"x": x, "ids": ids})[0]
    assert np.abs(got.numpy() - want).max() < 1e-5


def test_served_as_is_byte_for_byte_or_refused(files, tmp_path):
    """The served copy: every file as it is, the served version as version 1, the config's
    fields but name and version_policy unchanged; a backend this server lacks, or GPU
    instances on the CPU key, refused with the reason."""
    source = model_folder(tmp_path, files / "other.onnx",
                          CONFIG + "version_policy { latest { num_versions: 1 } }", ("3", "12"))
    (source / "3/model.onnx").write_bytes(b"not the served version")
    (source / "labels.txt").write_text("a\nb\n")
    served = triton_repository.serve_as_is(source, tmp_path / "out", "key", ["deploybench"],
                                           on_gpu=False)
    assert served == "deploybench"
    out = tmp_path / "out/key"
    assert sorted(p.name for p in out.iterdir()) == ["1", "config.pbtxt", "labels.txt"]
    assert (out / "1/model.onnx").read_bytes() == (files / "other.onnx").read_bytes()
    given, written = (triton_config.read(p / "config.pbtxt") for p in (source, out))
    assert written.name == "key" and not written.HasField("version_policy")
    given.name, written.name = "", ""
    given.ClearField("version_policy")
    assert given == written
    onnxruntime = CONFIG.replace('backend: "deploybench"', 'platform: "onnxruntime_onnx"')
    (source / "config.pbtxt").write_text(onnxruntime)
    with pytest.raises(ValueError) as refused:
        triton_repository.serve_as_is(source, tmp_path / "out2", "key",
                                      ["deploybench", "python"], on_gpu=False)
    for words in ("served by Triton's 'onnxruntime_onnx' backend, which this server lacks "
                  "(it has: deploybench, python)", "server.kind remote",
                  "server.kind binary or container", "deploybench add-model"):
        assert words in str(refused.value)
    config = text_format.Parse(CONFIG, mc.ModelConfig())
    config.instance_group[0].kind = mc.ModelInstanceGroup.KIND_GPU
    (source / "config.pbtxt").write_text(text_format.MessageToString(config))
    with pytest.raises(ValueError, match="asks for GPU instances .* measure it on a GPU key"):
        triton_repository.serve_as_is(source, tmp_path / "out3", "key", ["deploybench"],
                                      on_gpu=False)


def test_a_changed_repository_is_refused(files, tmp_path):
    copy = tmp_path / "mine"
    shutil.copytree(files / "repo/mine", copy)
    hparams = {"artifact": str(copy), "format": "triton-repository",
               "sha256": artifact.digest(copy), "source": None}
    assert artifact.own_export(hparams, "triton-repository") == copy
    (copy / "config.pbtxt").write_text(CONFIG.replace("16", "8"))
    with pytest.raises(ValueError, match="folder .* changed since it was added"):
        artifact.own_export(hparams, "triton-repository")
    with pytest.raises(ValueError, match="added without a source model"):
        artifact.build_model(hparams, None, 0)


def _run_file(files: Path, model: str, path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "models_dir": str(files / "models"), "matrix": {"models": [model]},
        "targets": [{"model": model, "gpu": "cpu", "backend": "repository",
                     "precision": "fp32"}]}))
    return path


def test_without_a_source_the_plan_has_no_accuracy_and_nothing_converts(files, tmp_path):
    """Planned from the user's folder: export (the copy), repository, offline, online, rate,
    floor and the reports; no conversion, its check, native or accuracy, each asked for
    alone refused with the reason."""
    assert add(files, "bare-repo", files / "repo/mine", "--force")[0].returncode == 0
    run_file = _run_file(files, "bare-repo", tmp_path / "run.yaml")
    work = ["-c", run_file, "--", "--directory", tmp_path]
    result = deploybench("plan", "-m", "bare-repo", "-g", "cpu", "-b", "repository", "-p",
                         "fp32", *work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    planned = {line.split()[0] for line in result.stdout.split("job ")[1].splitlines()[2:]
               if line.strip() and not line.startswith("total")}
    assert {"export_repository", "model_repository", "offline", "online", "rate", "floor",
            "configuration_report"} <= planned
    assert not planned & {"convert", "conversion_check", "native", "accuracy", "export"}
    folder = "results/bare-repo/cpu/repository_fp32"
    for target, words in ((f"{folder}/accuracy.csv", "has no `accuracy` section"),
                          (f"{folder}/native.csv", "serves a Triton model repository as it "
                                                   "is")):
        result = deploybench("plan", target, *work)
        assert result.returncode != 0
        assert words in result.stdout + result.stderr, result.stdout[-2000:]
