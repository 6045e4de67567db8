"""Triton python-backend model that serves a converted artifact (copied as model.py).

It runs inside Triton's python backend stub, so it imports only the runtime it serves
(onnxruntime or torch) and numpy, never the deploybench package. What it serves comes
from the `parameters` of config.pbtxt: `artifact` (file in the version folder),
`runtime` (onnxruntime | torch) and `precision` (fp32 | fp16). CPU instances share the
cores evenly, so that two instances on two cores do not oversubscribe them.
Requests of one execute() call (dynamic batching) are concatenated and run as one batch.
"""

import json
import os
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.inputs = [t["name"] for t in config["input"]]
        self.outputs = [t["name"] for t in config["output"]]
        self.output_dtypes = [
            pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]
        ]
        artifact = Path(args["model_repository"]) / args["model_version"] / params["artifact"]
        on_gpu = args["model_instance_kind"] == "GPU"
        cpu_instances = sum(g["count"] for g in config["instance_group"] if g["kind"] == "KIND_CPU")
        threads = 0 if on_gpu else max(1, (os.cpu_count() or 1) // max(1, cpu_instances))
        self.fp16 = params.get("precision") == "fp16"
        self.runtime = params["runtime"]
        if self.runtime == "torch":
            import torch

            self.torch = torch
            if threads:
                torch.set_num_threads(threads)
            self.device = torch.device(
                f"cuda:{args['model_instance_device_id']}" if on_gpu else "cpu"
            )
            self.model = torch.jit.load(str(artifact), map_location=self.device).eval()
        elif self.runtime == "onnxruntime":
            import onnxruntime as ort

            options = ort.SessionOptions()
            if threads:
                options.intra_op_num_threads = threads
            providers = ["CPUExecutionProvider"]
            if on_gpu:
                providers.insert(
                    0, ("CUDAExecutionProvider", {"device_id": args["model_instance_device_id"]})
                )
            self.session = ort.InferenceSession(str(artifact), options, providers=providers)
            self.session_inputs = {i.name: i.type for i in self.session.get_inputs()}
        else:
            raise pb_utils.TritonModelException(f"unknown runtime parameter '{self.runtime}'")

    def _run(self, arrays):
        if self.runtime == "onnxruntime":
            feed = {}  # an exported graph drops inputs the model never reads: skip those
            for name, array in zip(self.inputs, arrays):
                if name not in self.session_inputs:
                    continue
                if self.session_inputs[name] == "tensor(float16)":
                    array = array.astype(np.float16)
                feed[name] = array
            return self.session.run(self.outputs, feed)
        torch = self.torch
        with torch.inference_mode():
            tensors = []
            for array in arrays:
                tensor = torch.from_numpy(array).to(self.device, non_blocking=True)
                if self.fp16 and tensor.is_floating_point():
                    tensor = tensor.half()
                tensors.append(tensor)
            result = self.model(*tensors)
            result = result if isinstance(result, (tuple, list)) else (result,)
            return [r.float().cpu().numpy() for r in result]

    def execute(self, requests):
        per_request = [
            [pb_utils.get_input_tensor_by_name(r, name).as_numpy() for name in self.inputs]
            for r in requests
        ]
        sizes = [arrays[0].shape[0] for arrays in per_request]
        batch = [p[0] if len(p) == 1 else np.concatenate(p) for p in zip(*per_request)]
        outputs = self._run(batch)
        responses, start = [], 0
        for size in sizes:
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(out[start : start + size], dtype=dtype))
                for name, out, dtype in zip(self.outputs, outputs, self.output_dtypes)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses
