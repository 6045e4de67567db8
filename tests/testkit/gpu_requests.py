"""Requests to a GPU server's models through CUDA shared memory, and calls made at once (the
GPU tests of the C++ backend)."""
import base64


class CudaRegions:
    """CUDA shared memory made of one torch allocation, registered with the server through
    its IPC handle (torch's handle carries two bytes before the 64 of CUDA's)."""

    def __init__(self, client, size: int = 1 << 20):
        import torch

        self.client, self.used = client, 0
        self.buffer = torch.empty(size, dtype=torch.uint8, device="cuda")
        _, handle, _, offset, *_ = self.buffer.untyped_storage()._share_cuda_()
        self.base = offset
        client.register_cuda_shared_memory("cuda", base64.b64encode(handle[-64:]), 0,
                                           offset + size)

    def take(self, nbytes: int) -> tuple:
        """(offset in the region, a view of `nbytes` of it on the GPU)"""
        start = self.used
        self.used += -(-nbytes // 256) * 256
        return self.base + start, self.buffer[start:start + nbytes]


def cuda_infer(url: str, model: str, feed: dict, inputs_on: str, outputs_on: str,
               outputs=(("y", 3), ("s", 1))) -> list:
    """`model`'s inputs (`feed`: name -> FP32 or INT64 array) from CUDA shared memory or the
    request, its FP32 `outputs` ((name, width) each) into CUDA shared memory or the
    response (gRPC at `url`)."""
    import numpy as np
    import torch
    import tritonclient.grpc as grpcclient

    n = len(next(iter(feed.values())))  # the batch
    with grpcclient.InferenceServerClient(url) as client:
        cuda = CudaRegions(client)
        tensors = []
        for name, array in feed.items():
            tensor = grpcclient.InferInput(name, list(array.shape),
                                           "FP32" if array.dtype == np.float32 else "INT64")
            if inputs_on == "cuda":
                offset, place = cuda.take(array.nbytes)
                place.copy_(torch.from_numpy(array).view(torch.uint8).reshape(-1))
                tensor.set_shared_memory("cuda", array.nbytes, offset)
            else:
                tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        outs, places = [], {}
        for name, width in outputs:
            out = grpcclient.InferRequestedOutput(name)
            if outputs_on == "cuda":
                offset, places[name] = cuda.take(n * width * 4)
                out.set_shared_memory("cuda", n * width * 4, offset)
            outs.append(out)
        torch.cuda.synchronize()
        result = client.infer(model, tensors, outputs=outs)
        client.unregister_cuda_shared_memory()
        if outputs_on == "cuda":
            return [places[k].view(torch.float32).reshape(n, w).cpu().numpy()
                    for k, w in outputs]
        return [result.as_numpy(k) for k, _ in outputs]


def at_once(calls: list) -> list:
    """Each of `calls` (no arguments) on a thread of its own, all started before any is
    waited on; their results in order (an exception raised by any fails the caller)."""
    import threading

    results, errors = [None] * len(calls), []

    def run(k):
        try:
            results[k] = calls[k]()
        except Exception as err:  # raised below, in the caller's thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results
