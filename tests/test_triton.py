"""The real Triton server: start/stop, ports, load failures, generated configs."""

import shutil
import socket

import numpy as np
import pytest
import torch

from deploybench.triton import config as triton_config
from deploybench.triton import install, repository
from deploybench.triton.client import infer_all
from deploybench.triton.server import ServerError, TritonServer

RUN = {
    "key": {"model": "toy"},
    "model": {
        "inputs": [{"name": "x", "dtype": "FP32", "dims": [4]}],
        "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]}],
        "triton": {"max_batch_size": 8, "instances": 1, "preferred_batch_sizes": [4],
                   "max_queue_delay_us": 100},
    },
    "gpu": {"kind": "cpu"}, "backend": {"runner": "onnxruntime", "triton_backend": "onnxruntime"},
    "precision": "fp32", "artifact": "model.onnx", "server": {"serve_with": "auto"},
}


@pytest.fixture(scope="module")
def toy_repo(tmp_path_factory):
    """A real ONNX model in a generated repository."""
    work = tmp_path_factory.mktemp("toy")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    torch.onnx.export(model, (torch.randn(2, 4),), str(work / "m.onnx"), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}},
                      opset_version=17, dynamo=False)
    repository.create(RUN, work / "m.onnx", work / "repo" / "toy" / "config.pbtxt", ["python"])
    return work, model


def test_generated_config_parses_with_tritons_schema(toy_repo):
    work, _ = toy_repo
    config = triton_config.read(work / "repo" / "toy" / "config.pbtxt")
    assert config.max_batch_size == 8
    assert list(config.dynamic_batching.preferred_batch_size) == [4]
    assert config.parameters["runner"].string_value == "onnxruntime"
    assert "dynamic_batching" not in triton_config.load_override(config, static_batching=True)


@pytest.mark.e2e
def test_server_serves_the_model_and_always_stops(toy_repo):
    work, model = toy_repo
    server = TritonServer(install.prepare(), work / "repo", work / "server.log")
    with pytest.raises(RuntimeError, match="boom"), server:
        server.load("toy")
        x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
        (y,) = infer_all(server.grpc_url, RUN, [x], batch_size=2)
        np.testing.assert_allclose(y, model(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
        port = server.ports["http"]
        raise RuntimeError("boom")
    assert server._proc is None
    with socket.socket() as sock:  # the port is free again: the server is gone
        sock.bind(("127.0.0.1", port))


@pytest.mark.e2e
def test_a_port_in_use_is_refused_by_name(toy_repo):
    work, _ = toy_repo
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        ports = {"http": taken, "grpc": taken + 1, "metrics": taken + 2}
        with pytest.raises(ServerError, match=f"server.ports.http={taken} is already in use"):
            TritonServer(install.prepare(), work / "repo", work / "s.log", ports)


@pytest.mark.e2e
def test_a_model_that_fails_to_load_reports_the_servers_reason(toy_repo):
    work, _ = toy_repo
    broken = work / "broken_repo" / "toy"
    shutil.copytree(work / "repo" / "toy", broken)  # model.py and the runners it imports
    (broken / "1" / "model.onnx").write_bytes(b"not an onnx file")
    with TritonServer(install.prepare(), broken.parent, work / "broken.log") as server:
        with pytest.raises(ServerError, match="failed to load model 'toy'"):
            server.load("toy")


def test_perf_retries_lengthen_the_measurement_window():
    """perf_analyzer's advice when it cannot stabilise: more requests per window."""
    from types import SimpleNamespace

    from deploybench.triton import perf_analyzer

    run = {**RUN, "model": {**RUN["model"], "online": {"measurement_request_count": 50}},
           "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 5000,
                    "stability_percentage": 10, "max_trials": 10}}
    server = SimpleNamespace(install=SimpleNamespace(perf_analyzer="perf_analyzer"),
                             http_url="127.0.0.1:8000")
    counts = []
    for attempt in (1, 2, 3):
        cmd = perf_analyzer.command(run, "online", server, 1, 4, "data.json", "out.csv", attempt)
        counts.append(int(cmd[cmd.index("--measurement-request-count") + 1]))
    assert counts == [50, 100, 200]
