"""Triton python-backend model: the ensemble step before a real Merlin HPS sparse model
(copied as model.py). Categorical ids [B, T] -> HPS's keys of the fused table: each id
reduced modulo its table's size plus the table's offset (KEYS [B, T], INT64), and the
number of keys per sample (NUMKEYS [B, 1] = T, INT32). Table sizes come from the
config's `table_sizes` parameter (JSON)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        sizes = json.loads(config["parameters"]["table_sizes"]["string_value"])
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
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
