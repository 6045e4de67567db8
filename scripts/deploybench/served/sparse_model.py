"""Triton python-backend model: the sparse part of a recommender ensemble (model.py of
`<model>-sparse/1/`, beside the `sparse/` folder of the converted model).

The ensemble's keys (EMB_KEY: rows of the fused table; EMB_N_KEY: their count; one
request per batch, deploybench.ensemble.requests) -> the looked-up vectors [B, T x dim], by
embedding lookups over hierarchical storage (deploybench.runners.embeddings: the same code
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
        self.keys, self.count = (t["name"] for t in config["input"])
        self.output = config["output"][0]["name"]
        self.embeddings = HierarchicalEmbeddings(
            Path(args["model_repository"]) / args["model_version"] / params["artifact"],
            float(params["cache_fraction"]), device, placement=params["placement"],
            device_share=float(params["device_share"]))
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
        responses = []
        for request in requests:  # no batcher: each request is a whole batch
            keys = pb_utils.get_input_tensor_by_name(request, self.keys).as_numpy()
            count = int(pb_utils.get_input_tensor_by_name(request, self.count).as_numpy()
                        .reshape(-1)[0])
            if count != keys.size:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    f"{self.count} says {count} keys, {self.keys} holds {keys.size}")))
                continue
            before = (self.embeddings.lookups.copy(), self.embeddings.hits.copy())
            try:
                vectors = self.embeddings.lookup_keys(keys)
            except ValueError as err:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    str(err))))
                continue
            for (lookups, hits), n, h, n0, h0 in zip(self.metrics, self.embeddings.lookups,
                                                     self.embeddings.hits, *before):
                lookups.increment(int(n - n0))
                hits.increment(int(h - h0))
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor(self.output, vectors)]))
        return responses
