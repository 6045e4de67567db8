"""Triton python-backend model that serves a converted artifact with its runner.

What it serves comes from the `parameters` of config.pbtxt: `artifact` (a file or folder
in the version folder), `runner` (a name of deploybench.runners.MODULES) and `precision`
(fp32 | fp16). The requests of one execute() call (dynamic batching) are concatenated,
run as one batch and split back.
"""

import json
import os
import sys
from pathlib import Path

# The stub runs Python isolated (PYTHONPATH ignored): the runners bundled beside this file,
# then the pipeline's packages from DEPLOYBENCH_STUB_PATH (deploybench.triton.install).
for _path in reversed([str(Path(__file__).parent),
                       *os.environ.get("DEPLOYBENCH_STUB_PATH", "").split(os.pathsep)]):
    if _path and _path not in sys.path:
        sys.path.insert(0, _path)

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402
from deploybench_runners import Options, load  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        if int(np.__version__.split(".")[0]) >= 2:
            # Seen with Triton 2.51's stub: numpy 2 responses carry empty output tensors.
            raise pb_utils.TritonModelException(
                f"numpy {np.__version__} in the python backend stub: Triton 2.51 returns "
                "empty outputs with numpy 2; set DEPLOYBENCH_SERVER_PYTHONPATH to a folder "
                "with numpy<2 (scripts/offline_run.sh does)"
            )
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.inputs = [t["name"] for t in config["input"]]
        self.outputs = [t["name"] for t in config["output"]]
        self.output_dtypes = [
            pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]
        ]
        on_gpu = args["model_instance_kind"] == "GPU"
        # CPU instances share the cores evenly, so that two instances do not oversubscribe.
        cpu_instances = sum(g["count"] for g in config["instance_group"] if g["kind"] == "KIND_CPU")
        options = Options(
            inputs=tuple(self.inputs), outputs=tuple(self.outputs),
            precision=params.get("precision", "fp32"),
            device_id=int(args["model_instance_device_id"]) if on_gpu else None,
            threads=0 if on_gpu else max(1, (os.cpu_count() or 1) // max(1, cpu_instances)),
            max_batch_size=max(1, config.get("max_batch_size", 1)),
        )
        artifact = Path(args["model_repository"]) / args["model_version"] / params["artifact"]
        self.runner = load(params["runner"], artifact, options)

    def execute(self, requests):
        per_request = [
            [pb_utils.get_input_tensor_by_name(r, name).as_numpy() for name in self.inputs]
            for r in requests
        ]
        sizes = [arrays[0].shape[0] for arrays in per_request]
        batch = [p[0] if len(p) == 1 else np.concatenate(p) for p in zip(*per_request)]
        outputs = self.runner(batch)
        responses, start = [], 0
        for size in sizes:
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(out[start : start + size], dtype=dtype))
                for name, out, dtype in zip(self.outputs, outputs, self.output_dtypes)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += size
        return responses
