"""Triton python-backend model: the sparse part of a recommender ensemble (model.py of
`<model>-sparse/1/`, beside the `sparse/` folder of the converted model).

Embedding lookups over hierarchical storage (deploybench.runners.embeddings: the same code
the in-process ensemble runner uses). Lookups and cache hits per table are exported as
Triton metrics (`deploybench_embedding_lookups_total`,
`deploybench_embedding_cache_hits_total`, label `table`) on the server's metrics port.
"""

import json
import os
import sys
from pathlib import Path

# As served/python_model.py: the bundled runners, then DEPLOYBENCH_STUB_PATH.
for _path in reversed([str(Path(__file__).parent),
                       *os.environ.get("DEPLOYBENCH_STUB_PATH", "").split(os.pathsep)]):
    if _path and _path not in sys.path:
        sys.path.insert(0, _path)

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402
from deploybench_runners.embeddings import HierarchicalEmbeddings  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        if int(np.__version__.split(".")[0]) >= 2:  # see served/python_model.py
            raise pb_utils.TritonModelException(
                f"numpy {np.__version__} in the python backend stub: Triton 2.51 returns "
                "empty outputs with numpy 2; set DEPLOYBENCH_SERVER_PYTHONPATH to numpy<2")
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        on_gpu = args["model_instance_kind"] == "GPU"
        device = f"cuda:{args['model_instance_device_id']}" if on_gpu else "cpu"
        self.input = config["input"][0]["name"]
        self.output = config["output"][0]["name"]
        self.embeddings = HierarchicalEmbeddings(
            Path(args["model_repository"]) / args["model_version"] / params["sparse"],
            float(params["cache_fraction"]), device)
        labels = [{"model": args["model_name"], "table": str(i)}
                  for i in range(len(self.embeddings.sizes))]
        lookups = pb_utils.MetricFamily(
            name="deploybench_embedding_lookups_total",
            description="embedding lookups of the sparse model, per table",
            kind=pb_utils.MetricFamily.COUNTER)
        hits = pb_utils.MetricFamily(
            name="deploybench_embedding_cache_hits_total",
            description="lookups served from the device cache, per table",
            kind=pb_utils.MetricFamily.COUNTER)
        self.metrics = [(lookups.Metric(labels=lb), hits.Metric(labels=lb)) for lb in labels]
        self.families = (lookups, hits)  # the families must outlive their metrics

    def execute(self, requests):
        ids = [pb_utils.get_input_tensor_by_name(r, self.input).as_numpy() for r in requests]
        before = (self.embeddings.lookups.copy(), self.embeddings.hits.copy())
        vectors = self.embeddings(ids[0] if len(ids) == 1 else np.concatenate(ids))
        for (lookups, hits), n, h, n0, h0 in zip(self.metrics, self.embeddings.lookups,
                                                 self.embeddings.hits, *before):
            lookups.increment(int(n - n0))
            hits.increment(int(h - h0))
        responses, start = [], 0
        for part in ids:
            out = pb_utils.Tensor(self.output, vectors[start:start + len(part)])
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
            start += len(part)
        return responses
