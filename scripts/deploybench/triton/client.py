"""The pipeline's own requests to a running server (accuracy, warm-up), over gRPC, and
what it asks of the server's statistics (the batches its dynamic batcher formed)."""

from __future__ import annotations

import queue
from contextlib import closing

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from ..tensors import batched


def _request(model: dict, arrays: list[np.ndarray], served: list[str] | None,
             encode=None) -> list:
    """The request's input tensors: the arrays of the inputs named in `served` (all when
    None), in the model's order; `encode` (arrays -> [(tensor spec, array)]) makes the
    request of a model whose interface is not its samples' (an ensemble's flattened one)."""
    request = []
    pairs = encode(arrays) if encode else zip(model["inputs"], arrays)
    for spec, array in pairs:
        if served is None or spec["name"] in served:
            tensor = grpcclient.InferInput(spec["name"], list(array.shape), spec["dtype"])
            tensor.set_data_from_numpy(np.ascontiguousarray(array))
            request.append(tensor)
    return request


def infer_all(url: str, run: dict, inputs: list[np.ndarray], batch_size: int,
              served: list[str] | None = None, name: str | None = None,
              encode=None, version: str = "") -> list:
    """Outputs of the served model `name` (default the model key) at `version` ("": the
    latest) over `inputs` (gRPC at `url`), batch by batch; only the inputs named in
    `served` (all when None) are sent, each batch as `encode` makes its request
    (_request)."""
    model = run["model"]
    wanted = [grpcclient.InferRequestedOutput(t["name"]) for t in model["outputs"]]
    with closing(grpcclient.InferenceServerClient(url)) as client:

        def infer(arrays):
            result = client.infer(name or run["key"]["model"],
                                  _request(model, arrays, served, encode), version,
                                  outputs=wanted)
            return [result.as_numpy(t["name"]) for t in model["outputs"]]

        return batched(infer, inputs, batch_size)


def send_all(url: str, run: dict, batches, served: list[str] | None = None,
             name: str | None = None, encode=None, version: str = "") -> int:
    """Each batch of `batches` (lists of the model's input arrays) sent in turn to the
    model `name` (default the model key), the outputs discarded; returns the count."""
    sent = 0
    with closing(grpcclient.InferenceServerClient(url)) as client:
        for arrays in batches:
            client.infer(name or run["key"]["model"],
                         _request(run["model"], arrays, served, encode), version)
            sent += 1
    return sent


def warm_up(url: str, run: dict, inputs: list[np.ndarray], served: list[str],
            concurrency: int, rounds: int = 2, timeout_s: float = 600.0,
            name: str | None = None, encode=None, version: str = "") -> None:
    """`rounds` rounds of `concurrency` requests at once (of the batch `inputs` hold) to
    the model `name` (default the model key), so that every model instance runs, compiles
    or captures for that batch size before a measurement does."""
    tensors = _request(run["model"], inputs, served, encode)
    done = queue.Queue()
    with closing(grpcclient.InferenceServerClient(url)) as client:
        for _ in range(rounds):
            for _ in range(concurrency):
                client.async_infer(name or run["key"]["model"], tensors,
                                   lambda result, error: done.put(error), model_version=version)
            for _ in range(concurrency):
                error = done.get(timeout=timeout_s)
                if error is not None:
                    raise error


def executions_by_batch(server, model: str) -> dict[int, int]:
    """Triton's executions of `model` so far, by the batch size they ran at (its
    statistics: what the dynamic batcher formed, counted since the server started)."""
    with closing(httpclient.InferenceServerClient(server.http_url)) as client:
        stats = client.get_inference_statistics(server.served_name(model),
                                                 server.version)["model_stats"]
    return {int(b["batch_size"]): int(b["compute_infer"]["count"])
            for s in stats for b in s.get("batch_stats", [])}


def formed_since(server, model: str, before: dict[int, int]) -> dict[int, int]:
    """The executions by batch size since `before` (executions_by_batch then), nonzero."""
    now = executions_by_batch(server, model)
    return {b: n - before.get(b, 0) for b, n in sorted(now.items()) if n - before.get(b, 0)}
