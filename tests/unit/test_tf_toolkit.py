"""The TensorFlow side of the toolkit on a small Keras model: SavedModel and ONNX exports
with the config's tensor names, the runner the python backend serves them with, and the
config of Triton's tensorflow backend."""

import numpy as np
import pytest

from testkit.workflow import needs

tf = needs("tensorflow")
keras = needs("keras")

from deploybench import runners  # noqa: E402
from deploybench.source import keras_export  # noqa: E402
from deploybench.triton import config as triton_config  # noqa: E402
from deploybench.triton import repository, signature  # noqa: E402

INPUTS = [{"name": "numerical", "dtype": "FP32", "dims": [3]},
          {"name": "categorical", "dtype": "INT64", "dims": [2]}]
OUTPUTS = [{"name": "prob", "dtype": "FP32", "dims": [1]},
           {"name": "logit", "dtype": "FP32", "dims": [1]}]


class Toy(keras.Model):
    """Two inputs (one categorical), two outputs: the shape of the recommender models."""

    def __init__(self):
        super().__init__()
        self.table = keras.layers.Embedding(10, 4)
        self.head = keras.layers.Dense(1)

    def call(self, inputs, training=False):
        numerical, categorical = inputs
        flat = tf.reshape(self.table(categorical), [-1, 8])
        logit = self.head(tf.concat([numerical, flat], axis=1))
        return [tf.sigmoid(logit), logit]


def tf_run(backend: str, runner: str, precision: str, instances: int = 1) -> dict:
    """A run of the toy served by Triton's tensorflow backend."""
    return {"key": {"model": "toy", "backend": backend}, "precision": precision,
            "gpu": {"kind": "gpu"}, "artifact": "model.savedmodel",
            "backend": {"runner": runner, "triton_backend": "tensorflow"},
            "server": {"serve_with": "auto"},
            "model": {"inputs": INPUTS, "outputs": OUTPUTS,
                      "triton": {"max_batch_size": 64, "instances": instances,
                                 "preferred_batch_sizes": [64], "max_queue_delay_us": 1}}}


@pytest.fixture(scope="module")
def toy():
    keras.utils.set_random_seed(0)
    model = Toy()
    rng = np.random.default_rng(0)
    arrays = [rng.random((5, 3), dtype=np.float32), rng.integers(0, 10, (5, 2))]
    return model, arrays, [np.asarray(r) for r in model(arrays)]


def test_savedmodel_serves_the_same_outputs_in_config_order(toy, tmp_path):
    model, arrays, reference = toy
    keras_export.save_savedmodel(model, INPUTS, OUTPUTS, tmp_path / "model.savedmodel")
    runner = runners.load("tensorflow", tmp_path / "model.savedmodel",
                          runners.Options(inputs=tuple(t["name"] for t in INPUTS)))
    got = runner(arrays)
    assert [g.shape for g in got] == [(5, 1), (5, 1)]
    for g, r in zip(got, reference):
        np.testing.assert_array_equal(g, r)
    # What Triton's tensorflow backend reads: a signature keyed by the config's names.
    signature = tf.saved_model.load(str(tmp_path / "model.savedmodel")).signatures[
        "serving_default"]
    assert sorted(signature.structured_input_signature[1]) == ["categorical", "numerical"]
    assert sorted(signature.structured_outputs) == ["logit", "prob"]


def test_onnx_export_keeps_the_config_names(toy, tmp_path):
    import onnxruntime as ort

    model, arrays, reference = toy
    keras_export.save_onnx(model, INPUTS, OUTPUTS, tmp_path / "model.onnx", 17)
    session = ort.InferenceSession(str(tmp_path / "model.onnx"))
    assert [i.name for i in session.get_inputs()] == ["numerical", "categorical"]
    assert [o.name for o in session.get_outputs()] == ["prob", "logit"]
    got = session.run(None, dict(zip(["numerical", "categorical"], arrays)))
    for g, r in zip(got, reference):
        np.testing.assert_allclose(g, r, atol=1e-6)


def test_tensorflow_backend_config(tmp_path):
    run = tf_run("tf-savedmodel", "tensorflow", "fp16", instances=2)
    backend = repository.choose_backend(run, ["python", "tensorflow"])
    config = triton_config.model_config("toy", run, backend)
    assert config.platform == "tensorflow_savedmodel"
    assert config.default_model_filename == "model.savedmodel"
    (accel,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accel.name == "auto_mixed_precision"
    triton_config.write(config, tmp_path / "config.pbtxt")
    assert triton_config.read(tmp_path / "config.pbtxt") == config


def test_tf_trt_refuses_a_tensorflow_without_tensorrt(toy, tmp_path):
    if tf.sysconfig.get_build_info().get("is_tensorrt_build"):
        pytest.skip("this TensorFlow has TF-TRT")
    model, _, _ = toy
    keras_export.save_savedmodel(model, INPUTS, OUTPUTS, tmp_path / "model.savedmodel")
    with pytest.raises(RuntimeError, match="built without TensorRT .TF-TRT.; use the NGC"):
        runners.load("tensorflow-trt", tmp_path / "model.savedmodel",
                     runners.Options(inputs=tuple(t["name"] for t in INPUTS), precision="fp16"))


def test_tensorflow_backend_tf_trt_config():
    run = tf_run("tf-trt", "tensorflow-trt", "fp16")
    config = triton_config.model_config("toy", run, "tensorflow")
    assert config.platform == "tensorflow_savedmodel"
    (accel,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accel.name == "tensorrt" and accel.parameters["precision_mode"] == "FP16"


def test_a_tensorflow_config_is_checked_against_the_savedmodel_signature(toy, tmp_path):
    """Check 9 for Triton's tensorflow backend: the serving signature's names, types and
    dims against the config, before a server loads it."""
    model, _, _ = toy
    keras_export.save_savedmodel(model, INPUTS, OUTPUTS, tmp_path / "model.savedmodel")
    inputs, outputs = signature.savedmodel_signature(tmp_path / "model.savedmodel")
    assert inputs == {"numerical": ("FP32", [-1, 3]), "categorical": ("INT64", [-1, 2])}
    assert outputs == {"prob": ("FP32", [-1, 1]), "logit": ("FP32", [-1, 1])}
    config = triton_config.model_config("toy", tf_run("tf-savedmodel", "tensorflow", "fp32"),
                                        "tensorflow")
    signature.check(config, tmp_path / "model.savedmodel", "tensorflow", served_by_us=False)
    config.input[1].data_type = triton_config.mc.TYPE_INT32
    config.output[0].dims[0] = 2
    with pytest.raises(ValueError, match=r"input 'categorical' is INT64 in the artifact, the "
                                         r"config declares INT32; output 'prob' has dims "
                                         r"\[-1, 1\] in the artifact, the config declares "
                                         r"\[-1, 2\]"):
        signature.check(config, tmp_path / "model.savedmodel", "tensorflow",
                        served_by_us=False)
