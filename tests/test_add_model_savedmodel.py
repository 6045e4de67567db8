"""Your own TensorFlow SavedModel without a plug-in (`deploybench add-model`): a small model
the test saves itself (two inputs of different dtypes, two outputs, a dynamic batch),
described from its serving signature, refused without one or once changed, and measured by
the real pipeline (Triton's python backend, perf_analyzer) against the SavedModel run
in-process."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_add_model import RATES_OF_PEAK, deploybench, short_run

from deploybench.models import artifact
from deploybench.reporting.headline import CONTENDED_MARK, UNSTABLE_MARK

INPUTS = [{"name": "ids", "dtype": "INT64", "dims": [3]},  # the signature's, by name
          {"name": "x", "dtype": "FP32", "dims": [4]}]
OUTPUTS = [{"name": "label", "dtype": "INT64", "dims": [1]},
           {"name": "y", "dtype": "FP32", "dims": [2]}]


def weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((10, 4)).astype(np.float32),
            rng.standard_normal((4, 2)).astype(np.float32))


def expected(x: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The model's outputs computed here, apart from TensorFlow: (label, y)."""
    emb, w = weights()
    y = (x + emb[ids].sum(1)) @ w
    return y.argmax(1)[:, None], y


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """mine.savedmodel (its serving signature) and nosig.savedmodel (none)."""
    import tensorflow as tf

    emb, w = weights()

    class Mine(tf.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.w = tf.Variable(emb), tf.Variable(w)

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                      tf.TensorSpec([None, 3], tf.int64, name="ids")])
        def serve(self, x, ids):
            y = tf.matmul(x + tf.reduce_sum(tf.gather(self.emb, ids), axis=1), self.w)
            return {"y": y, "label": tf.argmax(y, axis=1, output_type=tf.int64)[:, None]}

    folder, model = tmp_path_factory.mktemp("saved"), Mine()
    tf.saved_model.save(model, str(folder / "mine.savedmodel"),
                        signatures={"serving_default": model.serve})
    tf.saved_model.save(model, str(folder / "nosig.savedmodel"), signatures={})
    return folder


def add(saved: Path, name: str, folder: str = "mine.savedmodel", *extra):
    models = saved / "models"
    result = deploybench("add-model", name, saved / folder, "--models-dir", models,
                         "--range", "ids=0:10", *extra)
    return result, models / f"{name}.yaml"


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


def _headline(readme: str, label: str) -> str:
    return next(line for line in readme.splitlines() if line.startswith(f"- **{label}**"))


@pytest.mark.e2e
def test_a_savedmodel_is_measured_end_to_end(saved, tmp_path):
    """`deploybench run` on the CPU key: every stage, and the report's numbers are its
    tables': offline and online peaks, the rate levels offered at fractions of the online
    peak, served/native, the accuracy check against the SavedModel run in-process (whose
    outputs are the model's, computed here apart)."""
    import pandas as pd

    result, path = add(saved, "mine-sm", "mine.savedmodel", "--force")
    assert result.returncode == 0, result.stderr
    run_file = short_run(saved / "models", "mine-sm", "tf-savedmodel", tmp_path / "run.yaml")
    result = deploybench("run", "-m", "mine-sm", "-g", "cpu", "-b", "tf-savedmodel", "-p",
                         "fp32", "-c", run_file, "--", "--directory", tmp_path, "--cores", "2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = tmp_path / "results/mine-sm/cpu/tf-savedmodel_fp32"
    readme = (folder / "README.md").read_text()
    # the source model is the SavedModel: its outputs are the model's
    with np.load(tmp_path / "results/mine-sm/source/eval.npz") as npz:
        label, y = expected(npz["x"], npz["ids"])
        assert np.abs(npz["reference:y"] - y).max() < 1e-5
        assert (npz["reference:label"] == label).all()
    accuracy = pd.read_csv(folder / "accuracy.csv").set_index("name")
    assert accuracy.loc["max_abs_deviation:y", "triton"] < 1e-5
    assert accuracy.loc["agreement:label", "triton"] == 1.0
    assert _headline(readme, "Accuracy").startswith(
        "- **Accuracy** against the source model: passed")
    assert pd.read_csv(folder / "conversion_check.csv")["max_abs_error"].max() < 1e-6
    # its export is the folder itself, byte for byte (and Snakemake's mark of a folder)
    exported = tmp_path / "results/mine-sm/export/tf-savedmodel/model.savedmodel"
    given = {p.relative_to(saved / "mine.savedmodel"): p.read_bytes()
             for p in (saved / "mine.savedmodel").rglob("*") if p.is_file()}
    copied = {p.relative_to(exported): p.read_bytes() for p in exported.rglob("*")
              if p.is_file() and p.name != ".snakemake_timestamp"}
    assert copied == given and len(given) == 4
    assert _headline(readme, "Served by").startswith("- **Served by**: python backend")
    offline = pd.read_csv(folder / "offline.csv")
    assert offline["Batch"].tolist() == [1, 8, 32]
    best = offline.loc[offline["Inferences/Second"].idxmax()]
    marks = "|".join(re.escape(m) for m in (CONTENDED_MARK, UNSTABLE_MARK))
    assert re.match(rf"- \*\*Offline\*\* .*: {best['Inferences/Second']:,.0f} inf/s({marks})* at "
                    rf"batch {int(best['Batch'])}$", _headline(readme, "Offline"))
    online = pd.read_csv(folder / "online.csv")
    assert online["Concurrency"].tolist() == [1, 2, 4]
    assert f"{online['Inferences/Second'].max():,.0f} inf/s" in _headline(readme, "Online")
    peak = online.loc[online["Stable"], "Inferences/Second"].max()
    rate = pd.read_csv(folder / "rate.csv")
    assert rate["Offered (req/s)"].tolist() == [float(f"{f * peak:.3g}") for f in RATES_OF_PEAK]
    # served/native at the largest batch: the offline figure over the in-process one
    native = pd.read_csv(folder / "native.csv").set_index("Batch")
    assert native.index.tolist() == [1, 8, 32]
    served = offline.set_index("Batch").loc[32, "Inferences/Second"]
    ratio = round(served / native.loc[32, "Inferences/Second"], 3)
    line = _headline(readme, "Served/native")
    assert f"{ratio:.3g} at batch 32" in line or "left out" in line, (line, ratio)
