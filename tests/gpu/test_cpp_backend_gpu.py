"""The C++ backend on a GPU: CUDA shared memory read and written in place, with and
without CUDA graphs, in FP32 and FP16."""

import copy

import numpy as np
import pytest
import torch

from testkit.cpp_toy import (
    Toy,
    expected,
    run_of,
    serve,
    toy,  # noqa: F401 (a fixture)
    triton,  # noqa: F401 (a fixture)
)
from testkit.gpu_requests import cuda_infer

# ---- on a GPU -------------------------------------------------------------------------

@pytest.mark.parametrize("runner", ["torch", "torch-cudagraph"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_on_a_gpu_cuda_shared_memory_is_read_and_written_in_place(triton, toy, runner,
                                                                  precision):
    """A GPU instance: inputs from CUDA shared memory (a GPU pointer the server opened)
    used by the kernels, outputs written into the client's CUDA region, and the host paths
    beside them; batch sizes that fall into several CUDA-graph buckets."""
    work, module = toy
    module = Toy(checks=False).eval()
    module.load_state_dict(toy[1].state_dict())
    artifact = work / f"model-{precision}.pt"
    scripted = torch.jit.script(copy.deepcopy(module).to("cuda"))
    (scripted.half() if precision == "fp16" else scripted).save(str(artifact))
    name = f"gpu-{runner}-{precision}"
    run = run_of(runner=runner, kind="gpu", precision=precision, instances=2)
    with serve(triton, work, run, name, artifact=artifact) as server:
        server.model = name
        for n in (1, 3, 8):
            x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
            want = expected(module, x, "cuda", half=precision == "fp16")
            for inputs_on in ("cuda", "host"):
                for outputs_on in ("cuda", "host"):
                    got = cuda_infer(server.grpc_url, server.model, {"x": x}, inputs_on,
                                     outputs_on)
                    for g, w in zip(got, want):
                        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6,
                                                   err_msg=f"{inputs_on} -> {outputs_on}")
    log = (work / f"{name}.log").read_text()
    assert f"loaded its {runner} engine on cuda:0" in log
