"""A Keras model as a SavedModel and as ONNX, with the model config's tensor names.

The SavedModel has the `serving_default` signature Triton's tensorflow backend reads
(inputs and outputs keyed by the config's names) and `ordered`, the same function
returning the outputs in the config's order, which the python backend's runner calls.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from ..tensors import numpy_dtype


def _signature(inputs: list[dict]) -> list:
    return [tf.TensorSpec([None, *t["dims"]], tf.as_dtype(numpy_dtype(t["dtype"])),
                          name=t["name"]) for t in inputs]


def _as_list(result) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def save_savedmodel(model, inputs: list[dict], outputs: list[dict], out: Path) -> None:
    names = [t["name"] for t in outputs]
    module = tf.Module()
    module.model = model

    @tf.function(input_signature=_signature(inputs))
    def ordered(*tensors):
        return tuple(_as_list(module.model(list(tensors), training=False)))

    @tf.function(input_signature=_signature(inputs))
    def serving_default(*tensors):
        return dict(zip(names, ordered(*tensors)))

    module.ordered = ordered
    module.output_names = tf.Variable(names, trainable=False)  # for signature callers
    tf.saved_model.save(module, str(out), signatures={"serving_default": serving_default})


def save_onnx(model, inputs: list[dict], outputs: list[dict], out: Path, opset: int) -> None:
    import numpy as np
    import onnx
    import tf2onnx

    # tf2onnx 1.17 calls numpy.product, which numpy 2 removed (the lent machine's numpy
    # under the tensorflow-cpu bundle: docs/gpus.md); numpy.prod is the same function
    if not hasattr(np, "product"):
        np.product = np.prod

    @tf.function(input_signature=_signature(inputs))
    def ordered(*tensors):
        return tuple(tf.identity(t, name=o["name"]) for t, o in
                     zip(_as_list(model(list(tensors), training=False)), outputs))

    # large_model: the weights stay out of the protobuf while tf2onnx works (it peaks at
    # half the memory otherwise); they are put back in to make one self-contained file.
    proto, external = tf2onnx.convert.from_function(
        ordered, input_signature=_signature(inputs), opset=opset, large_model=True)
    for tensor in proto.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = {e.key: e.value for e in tensor.external_data}["location"]
            tensor.raw_data = external.name_to_tensor_data[location]
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
    # tf2onnx may name graph ports after TF tensors ("<name>:0"): use the config's names.
    graph = proto.graph
    for ports, specs in ((graph.input, inputs), (graph.output, outputs)):
        for port, spec in zip(ports, specs):
            _rename(graph, port.name, spec["name"])
            port.name = spec["name"]
    onnx.save(proto, str(out))


def _rename(graph, old: str, new: str) -> None:
    if old == new:
        return
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
        node.output[:] = [new if o == old else o for o in node.output]
