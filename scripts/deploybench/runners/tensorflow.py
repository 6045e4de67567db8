"""TensorFlow: the runners `tensorflow` (a SavedModel, the pipeline's export or a user's
serving signature; FP16 is the references' "Automatic FP16", grappler's auto mixed
precision over the FP32 graph) and `tensorflow-trt` (the
SavedModel converted by TF-TRT at load time)."""

from __future__ import annotations

from pathlib import Path

from .base import Options, Runner, as_fp32


def _tensorflow(threads: int, device_id: int | None, fp16: bool):
    """TensorFlow set up once per process: its threads, and auto mixed precision."""
    import tensorflow as tf

    if device_id is not None and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("this TensorFlow has no GPU support (tensorflow-cpu?); install "
                           "tensorflow[and-cuda] for a GPU instance")
    if threads:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
        except RuntimeError:  # already initialised in this process
            pass
    if fp16:
        tf.config.optimizer.set_experimental_options({"auto_mixed_precision": True})
    return tf


def _tf_trt(tf, artifact: Path, precision: str, input_names: list[str]):
    """The SavedModel converted by TF-TRT (dynamic shapes), as a function of positional
    inputs returning the outputs in the exported order."""
    from tensorflow.python.compiler.tensorrt import trt_convert as trt

    if not tf.sysconfig.get_build_info().get("is_tensorrt_build"):
        raise RuntimeError("this TensorFlow was built without TensorRT (TF-TRT); use the "
                           "NGC TensorFlow or Triton image for backend 'tf-trt'")
    names = [n.decode() for n in tf.saved_model.load(str(artifact)).output_names.numpy()]
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(artifact), use_dynamic_shape=True,
        conversion_params=trt.TrtConversionParams(precision_mode=precision.upper()))
    function = converter.convert()

    def ordered(*tensors):
        result = function(**dict(zip(input_names, tensors)))
        return [result[n] for n in names]

    return ordered


def _by_name(signature, options: Options):
    """A signature (keyword tensors in, a dict out) as a function of the config's inputs in
    order, returning its outputs in the config's order."""
    def ordered(*tensors):
        result = signature(**dict(zip(options.inputs, tensors)))
        return [result[name] for name in options.outputs]

    return ordered


class TensorFlowRunner(Runner):
    def __init__(self, name: str, artifact: Path, options: Options):
        trt = name == "tensorflow-trt"
        fp16 = options.precision == "fp16" and not trt  # TF-TRT applies the precision
        self.tf = _tensorflow(options.threads, options.device_id, fp16)
        self.device = "/CPU:0" if options.device_id is None else f"/GPU:{options.device_id}"
        if trt:
            self.model = _tf_trt(self.tf, artifact, options.precision, list(options.inputs))
        else:
            with self.tf.device(self.device):
                self.loaded = self.tf.saved_model.load(str(artifact))  # owns the variables
            # the pipeline's exports have `ordered`; a user's SavedModel its serving
            # signature alone, called by the config's names
            self.model = getattr(self.loaded, "ordered", None) or _by_name(
                self.loaded.signatures["serving_default"], options)

    def __call__(self, arrays):
        with self.tf.device(self.device):
            result = self.model(*[self.tf.constant(a) for a in arrays])
        return [as_fp32(r.numpy()) for r in result]


def load(name: str, artifact: Path, options: Options) -> TensorFlowRunner:
    return TensorFlowRunner(name, artifact, options)
