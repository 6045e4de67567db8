"""ONNX -> TensorRT plan (TensorRT Python API), and running a plan in-process.

Only where TensorRT and a CUDA GPU exist; elsewhere these refuse with the reason.
"""

from __future__ import annotations

from pathlib import Path


def _tensorrt():
    try:
        import tensorrt
    except ImportError as err:
        raise RuntimeError(
            "backend 'trt' needs the TensorRT Python package (pip install tensorrt) and a "
            "CUDA GPU; neither is available on this machine"
        ) from err
    return tensorrt


def build_engine(run: dict, onnx_path: Path, out: Path) -> None:
    trt = _tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    if run["precision"] == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    max_batch = run["model"]["triton"]["max_batch_size"]
    profile = builder.create_optimization_profile()
    for spec in run["model"]["inputs"]:
        dims = spec["dims"]
        profile.set_shape(spec["name"], [1, *dims], [max_batch, *dims], [max_batch, *dims])
    config.add_optimization_profile(profile)
    engine = builder.build_serialized_network(network, config)
    if engine is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {onnx_path}")
    Path(out).write_bytes(bytes(engine))


def load_engine(path: Path):
    _tensorrt()
    raise RuntimeError("in-process TensorRT execution is not implemented yet")
