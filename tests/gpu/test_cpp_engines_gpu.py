"""The C++ backend's engines on a GPU: ONNX Runtime reads and writes CUDA shared memory in
place, its CUDA graphs serve every batch as without them, FP32 means FP32, and the
embedding store returns every row from the GPU."""

import re

import numpy as np
import onnxruntime as ort
import pytest
import torch
import tritonclient.grpc as grpcclient

from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, repository
from deploybench.triton.server import TritonServer
from testkit.gpu_requests import at_once, cuda_infer
from testkit.onnx_engine import (
    check_the_embedding_store,
    in_process,
    infer,
    run_of,
    samples,
    serve,
    triton,  # noqa: F401 (a fixture)
    work,  # noqa: F401 (a fixture)
)

ORT_GPU = pytest.mark.skipif("CUDAExecutionProvider" not in ort.get_available_providers(),
                             reason="needs onnxruntime-gpu")


@pytest.mark.parametrize("kind", ["gpu"])  # "cpu": tests/e2e/test_cpp_engines.py
@pytest.mark.parametrize("placement", ["cache", "fit"])
def test_the_embedding_store_returns_every_row_of_the_table(triton, tmp_path, placement, kind):
    check_the_embedding_store(triton, tmp_path, placement, kind)


# ---- on a GPU ---------------------------------------------------------------------------

@ORT_GPU
def test_on_a_gpu_onnx_runtime_reads_and_writes_cuda_shared_memory_in_place(triton, work):
    """A GPU instance on ONNX Runtime's CUDA provider: inputs from CUDA shared memory bound
    where the client put them, outputs written into its CUDA region, the host paths beside
    them; equal to ONNX Runtime's CUDA provider in-process."""
    with serve(triton, work, run_of(kind="gpu"), "gpu-two") as server:
        for n in (1, 3, 8):
            feed = samples(n, 20 + n)
            want = in_process(work, feed, ("CUDAExecutionProvider",))
            for inputs_on in ("cuda", "host"):
                for outputs_on in ("cuda", "host"):
                    got = cuda_infer(server.grpc_url, "gpu-two", feed, inputs_on, outputs_on)
                    for g, w in zip(got, want):
                        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6,
                                                   err_msg=f"{inputs_on} -> {outputs_on}")
    # its options read back hold the instance's stream (given without its flag, they held
    # none and the provider ran on its own: 2026-12-07)
    assert "CUDA execution provider on the instance's CUDA stream" in (
        work / "gpu-two.log").read_text()


@ORT_GPU
def test_on_a_gpu_onnx_runtimes_cuda_graphs_serve_every_batch_as_without(triton, work):
    """`triton.cuda_graphs` on a GPU: the engine captures a graph per bucket (1, 2, 4, 8; Triton
    warms each up) and pads a batch to its bucket. Batches on and between the buckets, one at
    a time and eight clients at once through the dynamic batcher, equal ONNX Runtime's CUDA
    provider in-process: a padded row, a stale buffer or a view overwritten by the next
    replay would show."""
    run = run_of(kind="gpu", delay_us=50_000)
    run["model"]["triton"]["cuda_graphs"] = True
    repo_config = work / "repo-graphs" / "graphs" / "config.pbtxt"
    with serve(triton, work, run, "graphs") as server:
        config = triton_config.read(repo_config)
        assert config.parameters["cuda_graphs"].string_value == "8"
        assert [w.batch_size for w in config.model_warmup] == [1, 2, 4, 8]
        for n in (1, 3, 5, 8, 2):
            feed = samples(n, 40 + n)
            for got, want in zip(infer(grpcclient, server.grpc_url, "graphs", feed),
                                 in_process(work, feed, ("CUDAExecutionProvider",))):
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-6, err_msg=f"batch {n}")
        feeds = [samples(b, 60 + b) for b in (1, 2, 3, 1, 2, 1, 3, 2)]
        results = at_once([lambda f=f: infer(grpcclient, server.grpc_url, "graphs", f)
                           for f in feeds])
    for feed, got in zip(feeds, results):
        for g, w in zip(got, in_process(work, feed, ("CUDAExecutionProvider",))):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
    log = (work / "graphs.log").read_text()
    assert "a CUDA graph per batch bucket up to 8" in log
    assert "CUDA graphs refused" not in log  # served from the graphs, not around them
    # each bucket's graph timed against a plain run at its capture (Triton's warm-up) and
    # kept: a graph this small is launch-bound, its replay far quicker
    kept = re.findall(r"CUDA graph at batch bucket (\d+) \(batch \d+\): replay ([\d.]+) ms, "
                      r"plain run ([\d.]+) ms: kept", log)
    assert sorted(int(b) for b, _, _ in kept) == [1, 2, 4, 8], log
    assert all(float(r) < float(p) for _, r, p in kept)


class Conv(torch.nn.Module):
    """FastPitch's width: where cuDNN's TF32 changes the result (by up to 9e-4 on an H200)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(384, 384, 3, padding=1)

    def forward(self, x):
        return self.conv(x), x.sum(dim=(1, 2)).unsqueeze(1)


def _conv_run(runner: str, backend: str) -> dict:
    return {"key": {"model": "conv", "backend": backend},
            "model": {"inputs": [{"name": "x", "dtype": "FP32", "dims": [384, 200]}],
                      "outputs": [{"name": "y", "dtype": "FP32", "dims": [384, 200]},
                                  {"name": "s", "dtype": "FP32", "dims": [1]}],
                      "triton": {"max_batch_size": 4, "instances": 1, "preferred_batch_sizes": [4],
                                 "max_queue_delay_us": 100}},
            "gpu": {"kind": "gpu"}, "backend": {"runner": runner, "triton_backend": None},
            "precision": "fp32", "artifact": "model.pt" if runner == "torch" else "model.onnx",
            "server": {"serve_with": "auto"}}


@pytest.mark.parametrize("runner", ["torch",
                                    pytest.param("onnxruntime", marks=ORT_GPU)])
def test_fp32_means_fp32_on_a_gpu(triton, tmp_path, runner):
    """An FP32 convolution served by either engine on a GPU equals the strict FP32 result
    in-process (TF32 off), and not the TF32 one, which differs by more than the bound: the
    test would fail if the backend left TF32 on."""
    torch.manual_seed(0)
    module = Conv().eval().cuda()
    x = torch.randn(4, 384, 200, device="cuda")
    if runner == "torch":
        torch.jit.trace(module, x).save(str(tmp_path / "model.pt"))
    else:
        torch.onnx.export(module, (x,), str(tmp_path / "model.onnx"), input_names=["x"],
                          output_names=["y", "s"], dynamic_axes={"x": {0: "B"}}, dynamo=False)

    def computed(tf32: bool) -> np.ndarray:
        if runner == "onnxruntime":
            session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=[
                ("CUDAExecutionProvider", {"use_tf32": int(tf32)})])
            return session.run(["y"], {"x": x.cpu().numpy()})[0]
        torch.backends.cudnn.allow_tf32 = tf32
        try:
            with torch.inference_mode():
                return module(x)[0].cpu().numpy()
        finally:
            torch.backends.cudnn.allow_tf32 = True

    strict, loose = computed(False), computed(True)
    assert np.abs(loose - strict).max() > 1e-4  # TF32 shows at this width
    run = _conv_run(runner, "ts-trace" if runner == "torch" else "onnx")
    repo = tmp_path / "repo"
    artifact = tmp_path / run["artifact"]
    assert repository.create(run, artifact, repo, triton.backends, "conv") == cpp_backend.NAME
    with TritonServer(triton, repo, tmp_path / "conv.log", "conv") as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x.cpu().numpy())
            served = client.infer("conv", [tensor]).as_numpy("y")
    assert np.abs(served - strict).max() < 1e-5, np.abs(served - strict).max()
