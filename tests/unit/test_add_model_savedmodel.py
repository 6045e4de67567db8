"""Your own TensorFlow SavedModel without a plug-in (`deploybench add-model`): a small model
the test saves itself (two inputs of different dtypes, two outputs, a dynamic batch),
described from its serving signature, refused without one or once changed, and measured by
the real pipeline (Triton's python backend, perf_analyzer) against the SavedModel run
in-process."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml

from deploybench.models import artifact
from testkit.add_model_savedmodel import (
    add,
    saved,  # noqa: F401 (a fixture)
)

INPUTS = [{"name": "ids", "dtype": "INT64", "dims": [3]},  # the signature's, by name
          {"name": "x", "dtype": "FP32", "dims": [4]}]
OUTPUTS = [{"name": "label", "dtype": "INT64", "dims": [1]},
           {"name": "y", "dtype": "FP32", "dims": [2]}]


def test_the_config_says_what_the_signature_holds(saved):
    result, path = add(saved, "mine-sm")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(path.read_text())
    assert config["inputs"] == INPUTS and config["outputs"] == OUTPUTS
    assert config["backends"] == ["tf-savedmodel"]
    assert config["hparams"]["format"] == "savedmodel"
    assert config["hparams"]["sha256"] == artifact.digest(saved / "mine.savedmodel")
    assert "deploybench run -m mine-sm -g cpu -b tf-savedmodel -p fp32" in result.stdout
    with np.load(config["data"]["path"]) as samples:
        assert samples["x"].dtype == np.float32 and samples["x"].shape == (64, 4)
        assert samples["ids"].dtype == np.int64 and samples["ids"].shape == (64, 3)
        assert samples["ids"].min() >= 0 and samples["ids"].max() < 10


def test_a_savedmodel_without_a_serving_signature_is_refused(saved):
    result, path = add(saved, "nosig", "nosig.savedmodel")
    assert result.returncode == 2, result.stdout
    for words in ("has no serving signature 'serving_default'", "its signatures: none",
                  "tf.saved_model.save(module, path, signatures={'serving_default': f})"):
        assert words in result.stderr, (words, result.stderr)
    assert not path.exists() and not path.with_suffix(".npz").exists()


def test_a_changed_savedmodel_is_refused(saved, tmp_path):
    """Its digest covers every file of the folder: new variables are another model."""
    copy = tmp_path / "mine.savedmodel"
    shutil.copytree(saved / "mine.savedmodel", copy)
    hparams = {"artifact": str(copy), "format": "savedmodel", "sha256": artifact.digest(copy),
               "inputs": INPUTS, "outputs": OUTPUTS}
    assert artifact.own_export(hparams, "tf-savedmodel") == copy
    assert artifact.own_export(hparams, "onnx") is None
    data = next(copy.glob("variables/variables.data-*"))
    data.write_bytes(data.read_bytes()[:-4] + b"\0\0\0\0")
    for call in (lambda: artifact.own_export(hparams, "tf-savedmodel"),
                 lambda: artifact.build_model(hparams, None, 0)):
        with pytest.raises(ValueError, match="folder .* changed since it was added"):
            call()
