"""A stand-in of TensorRT's Python bindings for the tests (TensorRT is not installable
here): what the repository step reads of a plan, its bindings, from a JSON file."""

import enum
import json
from pathlib import Path


class StandInTensorRT:
    """A stand-in of TensorRT's Python bindings (not installable here): a plan file holds
    its bindings as JSON ({name: [INPUT or OUTPUT, DataType name, dims]}), read back as
    TensorRT 10's engine answers num_io_tensors and the get_tensor_* calls."""
    TensorIOMode = enum.Enum("TensorIOMode", "INPUT OUTPUT")
    DataType = enum.Enum("DataType", "FLOAT HALF INT32 INT64 BOOL")

    class Logger:
        WARNING = 2

        def __init__(self, severity):
            self.severity = severity

    class Runtime:
        def __init__(self, logger):
            self.logger = logger

        def deserialize_cuda_engine(self, data: bytes):
            bindings = json.loads(data)
            trt = StandInTensorRT
            return type("Engine", (), {
                "num_io_tensors": len(bindings),
                "get_tensor_name": lambda self, i: list(bindings)[i],
                "get_tensor_mode": lambda self, n: trt.TensorIOMode[bindings[n][0]],
                "get_tensor_dtype": lambda self, n: trt.DataType[bindings[n][1]],
                "get_tensor_shape": lambda self, n: tuple(bindings[n][2])})()


# Triton's data types as TensorRT's DataType names them (the stand-in's plans)
TENSORRT_TYPES = {"FP32": "FLOAT", "FP16": "HALF", "INT32": "INT32", "INT64": "INT64",
                  "BOOL": "BOOL"}


def stand_in_plan(path: Path, inputs: list[dict], outputs: list[dict],
                  floating_outputs: str = "FLOAT") -> Path:
    """A plan StandInTensorRT reads: config tensor specs (name, dtype, dims) as bindings with
    a dynamic batch (where the dims have none), floating outputs typed `floating_outputs`."""
    def dims(t):
        return t["dims"] if -1 in t["dims"][:1] else [-1, *t["dims"]]

    path.write_text(json.dumps(
        {**{t["name"]: ["INPUT", TENSORRT_TYPES[t["dtype"]], dims(t)] for t in inputs},
         **{t["name"]: ["OUTPUT", floating_outputs if t["dtype"].startswith("FP")
                        else TENSORRT_TYPES[t["dtype"]], dims(t)] for t in outputs}}))
    return path
