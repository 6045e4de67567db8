"""What an artifact really takes and gives (names, data types, per-sample dims), read from
the artifact, and a model config checked against it as a framework backend checks it when
it loads the model: an ONNX graph's inputs and outputs, a TensorRT plan's bindings, a
SavedModel's serving signature.

A config served by the pipeline's own code (the python backend's model file, the C++
backend) declares the interface its runners give (floating tensors as FP32, whatever the
artifact's precision): there the names and dims must match, the data types are the
runners' to convert; the conversion check runs the artifact once through that runner and
checks what comes out against the config (deploybench.tensors.check_arrays).
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

Signature = dict[str, tuple[str, list[int]]]  # name -> (Triton dtype, dims with the batch)

_ONNX_TYPES = {1: "FP32", 10: "FP16", 11: "FP64", 16: "BF16", 6: "INT32", 7: "INT64",
               5: "INT16", 3: "INT8", 2: "UINT8", 9: "BOOL"}


def onnx_signature(path: Path) -> tuple[Signature, Signature]:
    """An ONNX graph's inputs (initializers aside) and outputs; a symbolic dim is -1."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name for t in graph.initializer}

    def read(values) -> Signature:
        out = {}
        for value in values:
            tensor = value.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
            out[value.name] = (_ONNX_TYPES.get(tensor.elem_type, f"ONNX type {tensor.elem_type}"),
                               dims)
        return out

    return read(v for v in graph.input if v.name not in weights), read(graph.output)


def plan_signature(path: Path) -> tuple[Signature, Signature]:
    """A TensorRT plan's input and output bindings (TensorRT reads them; its FP16 plan of an
    FP16 export gives FP16 outputs)."""
    from ..runners.tensorrt import plan_tensors

    return plan_tensors(path)


def savedmodel_signature(path: Path) -> tuple[Signature, Signature]:
    """A SavedModel's serving_default signature (TensorFlow reads it)."""
    import tensorflow as tf

    function = tf.saved_model.load(str(path)).signatures["serving_default"]
    inputs = {name: spec for name, spec in function.structured_input_signature[1].items()}

    def read(specs) -> Signature:
        return {name: (spec.dtype.name.upper().replace("FLOAT", "FP"),
                       [-1 if d is None else d for d in spec.shape.as_list()])
                for name, spec in specs.items()}

    return read(inputs), read(function.structured_outputs)


def _tensors(config: mc.ModelConfig, tensors) -> Signature:
    batch = [-1] if config.max_batch_size > 0 else []
    return {t.name: (mc.DataType.Name(t.data_type).removeprefix("TYPE_"), batch + list(t.dims))
            for t in tensors}


def mismatches(config: mc.ModelConfig, artifact: tuple[Signature, Signature],
               exact_types: bool) -> list[str]:
    """What in `config` differs from the artifact's signature: a tensor one side lacks,
    another data type (where `exact_types`: a framework backend serves the artifact as it
    is), other dims (-1 matches any size). Where our runners serve it (not `exact_types`),
    the config may list inputs the artifact does not take (an ONNX exporter drops unused
    ones; the runner sends what the graph takes)."""
    found = []
    for kind, declared, real in (("input", _tensors(config, config.input), artifact[0]),
                                 ("output", _tensors(config, config.output), artifact[1])):
        for name, (dtype, dims) in declared.items():
            if name not in real:
                if not (kind == "input" and not exact_types):  # our runners drop it
                    found.append(f"{kind} '{name}' is not in the artifact (it has: "
                                 f"{', '.join(sorted(real))})")
                continue
            real_type, real_dims = real[name]
            if exact_types and dtype != real_type:
                found.append(f"{kind} '{name}' is {real_type} in the artifact, the config "
                             f"declares {dtype}")
            fits = len(dims) == len(real_dims) and all(
                -1 in (a, b) or a == b for a, b in zip(dims, real_dims))
            if not fits:
                found.append(f"{kind} '{name}' has dims {real_dims} in the artifact, the "
                             f"config declares {dims}")
        if kind == "input":
            found += [f"input '{name}' of the artifact is not in the config"
                      for name in real if name not in declared]
    return found


def check(config: mc.ModelConfig, artifact: Path, triton_backend: str,
          served_by_us: bool) -> None:
    """Refuse a config whose tensors differ from its ONNX, TensorRT or SavedModel artifact's
    (other formats: the conversion check runs them); `served_by_us`: the python or C++
    backend, whose runners convert floating types."""
    path = Path(artifact)
    if path.suffix == ".onnx":
        real = onnx_signature(path)
    elif path.suffix == ".plan" and triton_backend == "tensorrt":
        real = plan_signature(path)  # our runners read the plan themselves
    elif path.suffix == ".savedmodel" and triton_backend == "tensorflow":
        real = savedmodel_signature(path)  # the python backend's runner reads it itself
    else:
        return
    found = mismatches(config, real, exact_types=not served_by_us)
    if found:
        raise ValueError(f"the config of model '{config.name}' ({triton_backend} backend) does "
                         f"not match its artifact {path.name}: " + "; ".join(found))
