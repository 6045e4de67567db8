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

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from deploybench.triton import config as triton_config
from deploybench.triton.server import ServerError
from testkit.gpu_requests import at_once
from testkit.onnx_engine import (
    check_the_embedding_store,
    graph,
    in_process,
    infer,
    run_of,
    samples,
    serve,
    triton,  # noqa: F401 (a fixture)
    work,  # noqa: F401 (a fixture)
)


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


@pytest.mark.parametrize("kind", ["cpu"])  # "gpu": tests/gpu/test_cpp_engines_gpu.py
@pytest.mark.parametrize("placement", ["cache", "fit"])
def test_the_embedding_store_returns_every_row_of_the_table(triton, tmp_path, placement, kind):
    check_the_embedding_store(triton, tmp_path, placement, kind)
