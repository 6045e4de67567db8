"""The C++ backend's ONNX Runtime engine and embedding store in the real Triton (the
backend's parts that need no server: test_cpp_unit.py). An ONNX graph of two inputs of
different dtypes, a third the graph does not read, served on ONNX Runtime's CPU execution
provider: outputs equal ONNX Runtime in-process (to rounding) over gRPC and HTTP; the dynamic
batcher's requests of different batch sizes come back to their own clients; a request the
graph refuses fails alone and the server serves on; a graph or a setting that cannot load says
why; on a GPU, its CUDA graphs serve every batch as without them. The
embedding store behind a sparse model's config: every looked-up row equals the table's, hit or
miss, through a cache a tenth of the table, and the server's metrics count the lookups and
hits per table."""

import json
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper

from deploybench.ensemble.metrics import cache_counters
from deploybench.runners.embeddings import METADATA, RANKING, STORAGE
from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, install, repository
from deploybench.triton.server import ServerError, TritonServer
from gpu_requests import at_once, cuda_infer

pytestmark = pytest.mark.e2e  # the real Triton server

GPU = pytest.mark.gpu
ORT_GPU = pytest.mark.skipif("CUDAExecutionProvider" not in ort.get_available_providers(),
                             reason="needs onnxruntime-gpu")


def graph(path, width: int = 4) -> None:
    """y = tanh(x W + b) * (i + 1), s = sum(x): x FP32 [B, width], i INT64 [B, 1]."""
    rng = np.random.default_rng(0)
    weight = helper.make_tensor("W", TensorProto.FLOAT, [width, 3],
                                rng.standard_normal((width, 3)).astype(np.float32).ravel())
    bias = helper.make_tensor("b", TensorProto.FLOAT, [3], [0.1, -0.2, 0.3])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"]),
             helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["f", "one"], ["g"]),
             helper.make_node("Mul", ["t", "g"], ["y"]),
             helper.make_node("ReduceSum", ["x"], ["s"], axes=[1], keepdims=1)]
    model = helper.make_model(helper.make_graph(
        nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", width]),
                       helper.make_tensor_value_info("i", TensorProto.INT64, ["B", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, ["B", 1])],
        [weight, bias, one]), opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, str(path))


def run_of(max_batch: int = 8, delay_us: int = 100, x_dims=(4,), kind: str = "cpu",
           precision: str = "fp32") -> dict:
    return {
        "key": {"model": "two", "backend": "onnx"},
        "model": {
            "inputs": [{"name": "x", "dtype": "FP32", "dims": list(x_dims)},
                       {"name": "i", "dtype": "INT64", "dims": [1]},
                       {"name": "unread", "dtype": "FP32", "dims": [2]}],
            "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]},
                        {"name": "s", "dtype": "FP32", "dims": [1]}],
            "triton": {"max_batch_size": max_batch, "instances": 1,
                       "preferred_batch_sizes": [max_batch], "max_queue_delay_us": delay_us},
        },
        "gpu": {"kind": kind},
        "backend": {"runner": "onnxruntime", "triton_backend": "onnxruntime"},
        "precision": precision, "artifact": "model.onnx", "server": {"serve_with": "auto"},
    }


@pytest.fixture(scope="module")
def triton():
    prepared = install.prepare()
    assert cpp_backend.NAME in prepared.backends, prepared.cpp_backend
    return prepared


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ort")
    graph(folder / "model.onnx")
    return folder


def serve(triton, work, run, name):
    repo = work / f"repo-{name}"
    assert repository.create(run, work / "model.onnx", repo, triton.backends, name) == \
        cpp_backend.NAME
    config = triton_config.read(repo / name / "config.pbtxt")
    assert config.parameters["runner"].string_value == "onnxruntime"
    return TritonServer(triton, repo, work / f"{name}.log", name)


def samples(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 4)).astype(np.float32),
            "i": rng.integers(0, 5, (n, 1)).astype(np.int64),
            "unread": np.full((n, 2), 7, np.float32)}


def in_process(work, feed: dict, providers=("CPUExecutionProvider",)) -> list[np.ndarray]:
    """ONNX Runtime in this process, FP32 strict as the engine serves an FP32 model (the CUDA
    provider's default allows TF32: 1e-3 apart from the engine on an H200, 2026-11-29)."""
    options = [{"use_tf32": "0"} if p == "CUDAExecutionProvider" else {} for p in providers]
    session = ort.InferenceSession(str(work / "model.onnx"), providers=list(providers),
                                   provider_options=options)
    return session.run(["y", "s"], {k: feed[k] for k in ("x", "i")})


def infer(client_module, url: str, model: str, feed: dict) -> list[np.ndarray]:
    with client_module.InferenceServerClient(url) as client:
        tensors = []
        for name, array in feed.items():
            tensor = client_module.InferInput(name, list(array.shape),
                                              "FP32" if array.dtype == np.float32 else "INT64")
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        result = client.infer(model, tensors)
        return [result.as_numpy("y"), result.as_numpy("s")]


def test_outputs_equal_onnx_runtime_in_process_over_grpc_and_http(triton, work):
    feed = samples(5, 1)
    want = in_process(work, feed)
    assert not np.allclose(want[0], np.tanh(want[0]))  # i's factor shows in y
    with serve(triton, work, run_of(), "two") as server:
        for module, url in ((grpcclient, server.grpc_url), (httpclient, server.http_url)):
            for got, w in zip(infer(module, url, "two", feed), want):
                np.testing.assert_allclose(got, w, rtol=0, atol=1e-6)
    log = (work / "two.log").read_text()
    assert "loaded its onnxruntime engine on cpu" in log
    assert "CPU execution provider, 2 of the config's inputs bound" in log


def test_the_dynamic_batchers_requests_come_back_to_their_clients(triton, work):
    """Eight clients at once, batches of 1 to 8 samples: every response holds its own
    client's outputs, and the server ran fewer batches than requests."""
    feeds = [samples(b, 10 + b) for b in range(1, 9)]
    with serve(triton, work, run_of(max_batch=64, delay_us=200_000), "batched") as server:
        results = at_once([lambda f=f: infer(grpcclient, server.grpc_url, "batched", f)
                           for f in feeds])
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            stats = client.get_inference_statistics("batched").model_stats[0]
    for feed, got in zip(feeds, results):
        for g, w in zip(got, in_process(work, feed)):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
    assert stats.inference_count == sum(range(1, 9))
    assert stats.execution_count < len(feeds), stats
    for part in (stats.inference_stats.compute_input, stats.inference_stats.compute_infer):
        assert part.count == len(feeds) and part.ns > 0, stats


def test_a_request_the_graph_refuses_fails_alone_and_the_server_serves_on(triton, work):
    """A config that lets x's width vary (dims [-1]): a request of width 5 reaches ONNX
    Runtime, which refuses it; its error says so, and the next request is served."""
    with serve(triton, work, run_of(x_dims=(-1,)), "loose") as server:
        wrong = samples(2, 3)
        wrong["x"] = np.ones((2, 5), np.float32)
        with pytest.raises(Exception, match=r"model 'loose': onnxruntime: run: .*x"):
            infer(grpcclient, server.grpc_url, "loose", wrong)
        server.ensure_alive()
        feed = samples(3, 4)
        for got, want in zip(infer(grpcclient, server.grpc_url, "loose", feed),
                             in_process(work, feed)):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_a_graph_that_cannot_load_is_unavailable_with_the_reason(triton, work, tmp_path):
    graph(tmp_path / "model.onnx")
    server = serve(triton, tmp_path, run_of(), "broken")  # the repository, checked
    (tmp_path / "repo-broken/broken/1/model.onnx").write_bytes(b"not an ONNX graph")
    with pytest.raises(ServerError, match=r"instance 'broken_0_0': onnxruntime: loading .*"
                                          r"model.onnx"):
        with server:
            pass
    server = serve(triton, tmp_path, run_of(), "unmatched")
    path = tmp_path / "repo-unmatched/unmatched/config.pbtxt"
    config = triton_config.read(path)  # an output the graph does not have (the repository
    config.output[1].name = "total"    # step's signature check refuses it before a server)
    triton_config.write(config, path)
    with pytest.raises(ServerError, match="declares an output 'total' that the ONNX graph "
                                          "does not have"):
        with server:
            pass
    server = serve(triton, tmp_path, run_of(), "graphs")
    path = tmp_path / "repo-graphs/graphs/config.pbtxt"
    config = triton_config.read(path)  # a graph batch that is no batch size
    config.parameters["cuda_graphs"].string_value = "eight"
    triton_config.write(config, path)
    with pytest.raises(ServerError, match=r"parameter cuda_graphs 'eight' is not a batch size"):
        with server:
            pass
    config.parameters["cuda_graphs"].string_value = "8"  # a batch, on a CPU instance
    triton_config.write(config, path)
    with pytest.raises(ServerError, match=r"parameter cuda_graphs 8: CUDA graphs need a GPU "
                                          r"instance, and this one is on the CPU"):
        with server:
            pass


# ---- the embedding store ----------------------------------------------------------------

SIZES, DIM = [500, 300, 200], 8


def sparse_folder(path):
    rng = np.random.default_rng(5)
    path.mkdir(parents=True)
    storage = rng.standard_normal((sum(SIZES), DIM)).astype(np.float32)
    np.save(path / STORAGE, storage)
    np.save(path / RANKING, np.arange(sum(SIZES), dtype=np.int64))  # row 0 the most frequent
    (path / METADATA).write_text(json.dumps({"table_sizes": SIZES, "embedding_dim": DIM}))
    return storage


def sparse_repository(repo, placement: str, kind: str) -> None:
    version = repo / "sparse" / repository.VERSION
    config = triton_config.sparse_config(
        "sparse", {"gpu": {"kind": kind}, "model": {"triton": {"instances": 1}}},
        [{"name": "EMB_KEY", "dtype": "INT64", "dims": [-1]},
         {"name": "EMB_N_KEY", "dtype": "INT32", "dims": [1]}],
        {"name": "LOOKUP", "dtype": "FP32", "dims": [-1, len(SIZES) * DIM]},
        {"runner": "embeddings", "artifact": "sparse", "placement": placement,
         "cache_fraction": "0.1", "device_share": "0.5"}, cpp_backend.NAME)
    sparse_folder(version / "sparse")
    triton_config.write(config, repo / "sparse" / "config.pbtxt")


def lookup(url: str, keys: np.ndarray) -> np.ndarray:
    with grpcclient.InferenceServerClient(url) as client:
        key = grpcclient.InferInput("EMB_KEY", [len(keys)], "INT64")
        key.set_data_from_numpy(keys)
        count = grpcclient.InferInput("EMB_N_KEY", [1], "INT32")
        count.set_data_from_numpy(np.array([len(keys)], np.int32))
        return client.infer("sparse", [key, count]).as_numpy("LOOKUP")


@pytest.mark.parametrize("kind", ["cpu", pytest.param("gpu", marks=GPU)])
@pytest.mark.parametrize("placement", ["cache", "fit"])
def test_the_embedding_store_returns_every_row_of_the_table(triton, tmp_path, placement, kind):
    """Skewed keys (a tenth of them past the ranked rows): through the cache or the whole
    table, on the CPU or a GPU, every row equals the table's; the metrics count every
    lookup, and the hits are fewer than the lookups through a cache, all of them with the
    tables whole."""
    repo = tmp_path / "repo"
    sparse_repository(repo, placement, kind)
    storage = np.load(repo / "sparse/1/sparse" / STORAGE)
    offsets = np.cumsum([0, *SIZES[:-1]])
    rng = np.random.default_rng(6)
    with TritonServer(triton, repo, tmp_path / "server.log", "sparse") as server:
        for _ in range(30):
            ids = np.minimum(rng.geometric(3 / np.array(SIZES), (16, len(SIZES))),
                             np.array(SIZES) - 1)
            keys = (ids + offsets).reshape(-1).astype(np.int64)
            np.testing.assert_array_equal(lookup(server.grpc_url, keys),
                                          storage[keys].reshape(16, -1))
        counters = cache_counters(server.metrics())
        with pytest.raises(Exception, match=r"keys outside the fused table's 1000 rows "
                                            r"\(min 0, max 1000\)"):
            lookup(server.grpc_url, np.array([0, 1, 1000], np.int64))
        with pytest.raises(Exception, match=r"outside the fused table's 1000 rows \(min -1"):
            lookup(server.grpc_url, np.array([-1, 1, 2], np.int64))
        # served on, the failed lookups not counted (on a GPU they were, until checked)
        np.testing.assert_array_equal(lookup(server.grpc_url, keys), storage[keys].reshape(16, -1))
        after = cache_counters(server.metrics())
    assert counters["lookups"] == 30 * 16 * len(SIZES)
    assert after["lookups"] == 31 * 16 * len(SIZES)
    if placement == "cache":
        assert 0 < counters["hit_rate"] < 1, counters
    else:
        assert counters["hit_rate"] == 1, counters
    log = (tmp_path / "server.log").read_text()
    device = "cpu" if kind == "cpu" else "cuda:0"
    assert ("1000 rows of 8 (0 MiB) whole on " + device in log) == (placement == "fit"), log
    assert ("in host memory, 100 rows cached on " + device in log) == (placement == "cache")


# ---- on a GPU ---------------------------------------------------------------------------

@GPU
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
    assert "CUDA execution provider" in (work / "gpu-two.log").read_text()


@GPU
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


@pytest.mark.parametrize("runner", [pytest.param("torch", marks=GPU),
                                    pytest.param("onnxruntime", marks=[GPU, ORT_GPU])])
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
