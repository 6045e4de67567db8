"""Triton python-backend model: the ensemble step before a real Merlin HPS sparse model.

Categorical ids [B, T] -> HPS's keys of the fused table: each id reduced modulo its
table's size plus the table's offset (KEYS [B, T], INT64), and the number of keys per
sample (NUMKEYS [B, 1] = T, INT32). Table sizes come from the config's `table_sizes`
parameter (JSON)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the bundled runners

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402
from deploybench_runners.embeddings import table_offsets  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        sizes = json.loads(config["parameters"]["table_sizes"]["string_value"])
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = table_offsets(self.sizes)
        self.input = config["input"][0]["name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            ids = pb_utils.get_input_tensor_by_name(request, self.input).as_numpy()
            keys = np.mod(ids.astype(np.int64), self.sizes) + self.offsets
            count = np.full((len(ids), 1), len(self.sizes), dtype=np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("KEYS", keys), pb_utils.Tensor("NUMKEYS", count)]))
        return responses
