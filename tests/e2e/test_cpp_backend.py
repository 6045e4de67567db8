"""The pipeline's C++ backend (`deploybench`, triton_backend/) in the real Triton: built by
the set-up, it serves TorchScript with libtorch in the server's process. Outputs equal the
in-process module's on every data path (gRPC, HTTP, system shared memory; on a GPU, CUDA
shared memory in and out, CUDA graphs, FP16); the dynamic batcher's requests come back to
their own clients; a model that raises, or a request of the wrong type, gets an error
response and the server serves on; a model that cannot load says why; the server-side
statistics that perf_analyzer reads are filled; the pipeline's BERT and FastPitch, converted
by the real Snakemake, served equal to their in-process runner."""

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from deploybench import artifacts
from deploybench.settings import deployments
from deploybench.source import model as source_model
from deploybench.steps.conversion_check import tolerance
from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, repository
from deploybench.triton.client import infer_all
from deploybench.triton.server import ServerError, TritonServer
from testkit import cpp_toy
from testkit.cpp_toy import (
    _region,
    expected,
    grpc_infer,
    run_of,
    serve,
    toy,  # noqa: F401 (a fixture)
    triton,  # noqa: F401 (a fixture)
)
from testkit.gpu_requests import at_once
from testkit.measured import check_littles_law
from testkit.workflow import snakemake


def test_outputs_equal_the_module_over_grpc_http_and_system_shared_memory(triton, toy):
    work, module = toy
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    want = expected(module, x)
    with serve(triton, work, run_of()) as server:
        for got in (grpc_infer(server, x), _http_infer(server, x), _system_shm_infer(server, x)):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)


def _http_infer(server, x):
    with httpclient.InferenceServerClient(server.http_url) as client:
        tensor = httpclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        result = client.infer("toy", [tensor])
        return [result.as_numpy("y"), result.as_numpy("s")]


def _system_shm_infer(server, x):
    """Input and both outputs in system shared memory regions the server maps."""
    n = x.shape[0]
    shapes = {"x": x.shape, "y": (n, 3), "s": (n, 1)}
    # the server opens a key in its private folder (triton.server's shim)
    regions = {k: _region(server, f"toy-{k}", int(np.prod(shape)) * 4)
               for k, shape in shapes.items()}
    views = {k: np.ndarray(shapes[k], np.float32, regions[k]) for k in shapes}
    try:
        views["x"][:] = x
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            for k, region in regions.items():
                client.register_system_shared_memory(f"r{k}", f"/toy-{k}", len(region))
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_shared_memory("rx", x.nbytes)
            outs = [grpcclient.InferRequestedOutput(k) for k in ("y", "s")]
            for out in outs:
                out.set_shared_memory(f"r{out.name()}", views[out.name()].nbytes)
            client.infer("toy", [tensor], outputs=outs)
            client.unregister_system_shared_memory()
        return [views["y"].copy(), views["s"].copy()]
    finally:
        del views
        for k, region in regions.items():
            region.close()
            ((server.shm_dir or Path("/dev/shm")) / f"toy-{k}").unlink()


def test_the_dynamic_batchers_requests_come_back_to_their_clients(triton, toy):
    """Eight clients at once, batches of 1 to 8 samples, each its own data: every response
    holds its own client's outputs, and the server ran fewer batches than requests."""
    work, module = toy
    run = run_of(max_batch=64, delay_us=200_000)  # a long queue delay: the requests meet
    rng = np.random.default_rng(2)
    requests = [rng.standard_normal((b, 4)).astype(np.float32) for b in range(1, 9)]
    with serve(triton, work, run, "batched") as server:
        results = at_once([lambda x=x: grpc_infer(server, x, "batched") for x in requests])
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            stats = client.get_inference_statistics("batched").model_stats[0]
    for x, got in zip(requests, results):
        for g, w in zip(got, expected(module, x)):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
    assert stats.inference_count == sum(len(x) for x in requests)
    assert stats.execution_count < len(requests), stats
    # the server-side breakdown perf_analyzer reads, filled for every request
    breakdown = stats.inference_stats
    for part in (breakdown.success, breakdown.compute_input, breakdown.compute_infer,
                 breakdown.compute_output):
        assert part.count == len(requests) and part.ns > 0, stats
    assert sum(b.batch_size * b.compute_infer.count for b in stats.batch_stats) == \
        stats.inference_count


def test_a_model_that_raises_or_a_wrong_dtype_gets_an_error_and_the_server_serves_on(
        triton, toy):
    work, module = toy
    x = np.ones((2, 4), np.float32)
    with serve(triton, work, run_of(), "raising") as server:
        with pytest.raises(Exception, match="toy refuses inputs above 1e6"):
            grpc_infer(server, x * 1e7, "raising")
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            wrong = grpcclient.InferInput("x", [2, 4], "INT32")
            wrong.set_data_from_numpy(x.astype(np.int32))
            with pytest.raises(Exception, match="data-type is 'INT32', but model 'raising' "
                                                "expects 'FP32'"):
                client.infer("raising", [wrong])
        server.ensure_alive()
        for g, w in zip(grpc_infer(server, x, "raising"), expected(module, x)):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)


@pytest.mark.parametrize("serve_with", [cpp_backend.NAME, "python"])
def test_one_bad_request_in_a_dynamic_batch_fails_alone_without_a_path(triton, toy, serve_with):
    """One client's request with a value the model refuses, among eight other clients'
    good ones, all in the dynamic batcher's queue at once: the good ones used to fail with
    the batch (79 % on the C++ backend, 77 % on the python backend) and the bad one got a
    traceback with the server's paths. Now every good request gets its own outputs, the bad
    one an error that says what is wrong and names no file, Triton's statistics count that
    one failure (the C++ backend's), and the server log keeps the traceback."""
    work, module = toy
    name = f"mixed-{serve_with}"
    run = {**run_of(max_batch=64, delay_us=300_000), "server": {"serve_with": serve_with}}
    repo = work / f"repo-{name}"
    assert repository.create(run, work / "model.pt", repo, triton.backends, name) == serve_with
    rng = np.random.default_rng(3)
    sent = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(9)]
    sent[4][1, 2] = 1e9  # the bad value, in its second sample

    def send(x):
        try:
            return grpc_infer(server, x, name)
        except InferenceServerException as err:
            return err

    with TritonServer(triton, repo, work / f"{name}.log", name) as server:
        results = at_once([lambda x=x: send(x) for x in sent])
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            stats = client.get_inference_statistics(name).model_stats[0].inference_stats
    for x, got in [*zip(sent[:4], results[:4]), *zip(sent[5:], results[5:])]:
        assert not isinstance(got, Exception), got
        for g, w in zip(got, expected(module, x)):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
    refused = results[4]
    assert isinstance(refused, InferenceServerException), refused
    assert re.fullmatch(rf"model '{name}': (\w+: )?(builtins\.)?RuntimeError: toy refuses "
                        r"inputs above 1e6", refused.message()), refused.message()
    # (Triton's python backend counts a request it answered with an error as a success)
    assert (stats.success.count, stats.fail.count) == (
        (8, 1) if serve_with == cpp_backend.NAME else (9, 0)), stats
    log = (work / f"{name}.log").read_text()
    assert re.search(rf"model '{name}' failed a batch of [2-9] requests", log), log[-3000:]
    assert "Traceback" in log and Path(cpp_toy.__file__).name in log  # the model's source


def test_a_region_truncated_under_the_server_fails_its_request_not_the_server(triton, toy):
    """A client's system shared-memory region, truncated by the server's own user after it
    was registered: the server's in-place read of it used to end the server (SIGBUS in
    libtorch). Now the request fails, naming the truncation, as does a later one naming the
    region (its lost page reads as zeros), an output region truncated likewise fails its
    request, and the server serves every other request on."""
    work, module = toy
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    want = expected(module, x)
    with serve(triton, work, run_of(), "truncated") as server, \
            grpcclient.InferenceServerClient(server.grpc_url) as client:
        regions = {k: _region(server, f"cut-{k}", 4096) for k in ("x", "y")}
        np.ndarray(x.shape, np.float32, regions["x"])[:] = x
        for k in regions:
            client.register_system_shared_memory(f"r{k}", f"/cut-{k}", 4096)

        def infer(output_in_region: bool):
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_shared_memory("rx", x.nbytes)
            out = grpcclient.InferRequestedOutput("y")
            if output_in_region:
                out.set_shared_memory("ry", 3 * x.shape[0] * 4)
            return client.infer("truncated", [tensor], outputs=[out])

        np.testing.assert_allclose(infer(False).as_numpy("y"), want[0], rtol=0, atol=1e-6)
        os.truncate(server.shm_dir / "cut-y", 0)
        with pytest.raises(InferenceServerException, match=r"output 'y' lies in a shared-"
                                                           r"memory region that was truncated"):
            infer(True)
        os.truncate(server.shm_dir / "cut-x", 0)
        for _ in range(2):  # the page lost, and remembered
            with pytest.raises(InferenceServerException, match=r"input 'x' lies in a shared-"
                                                               r"memory region that was trunc"):
                infer(False)
        server.ensure_alive()
        for g, w in zip(grpc_infer(server, x, "truncated"), want):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
        client.unregister_system_shared_memory()
        for region in regions.values():
            region.close()


class Warns(torch.nn.Module):
    """A module that warns at every call, as a TorchScript LSTM whose weights are not one
    chunk does on a GPU."""

    def forward(self, x):
        warnings.warn("toy warns at every call", stacklevel=2)
        return torch.tanh(x[:, :3]), x.sum(dim=1, keepdim=True)


def test_a_warning_at_every_call_is_logged_once_then_at_powers_of_ten(triton, toy, tmp_path):
    torch.jit.script(Warns()).save(str(tmp_path / "model.pt"))
    x = np.ones((1, 4), np.float32)
    with serve(triton, tmp_path, run_of(max_batch=1), "warns") as server:
        for _ in range(12):
            grpc_infer(server, x, "warns")
    lines = [line for line in (tmp_path / "warns.log").read_text().splitlines()
             if "toy warns at every call" in line]
    assert len(lines) == 2, lines
    assert "libtorch warning (1 time)" in lines[0] and "(10 times so far)" in lines[1], lines


def test_a_model_that_cannot_load_is_unavailable_with_the_reason(triton, toy, tmp_path):
    work, _ = toy
    broken = tmp_path / "model.pt"
    broken.write_bytes(b"not a TorchScript archive")
    with pytest.raises(ServerError, match=r"deploybench backend: instance 'broken_0_0': .*"
                                          r"(PytorchStreamReader|zip archive)"):
        with serve(triton, tmp_path, run_of(), "broken", artifact=broken):
            pass
    bad = run_of(runner="no-such")
    repo = tmp_path / "repo-bad"
    repository.create(run_of(), work / "model.pt", repo, triton.backends, "bad")
    config = triton_config.read(repo / "bad" / "config.pbtxt")
    config.parameters["runner"].string_value = bad["backend"]["runner"]
    triton_config.write(config, repo / "bad" / "config.pbtxt")
    with pytest.raises(ServerError, match=r"parameter runner 'no-such' is not one this "
                                          r"backend serves \(valid: torch, torch-cudagraph"):
        with TritonServer(triton, repo, tmp_path / "bad.log", "bad"):
            pass


@pytest.mark.parametrize("serve_with", [cpp_backend.NAME, "python"])
def test_a_cuda_graph_keys_config_warms_every_instance_at_every_bucket_as_it_loads(
        triton, toy, tmp_path, serve_with):
    """A ts-trace-cg config as the repository step writes it (model_warmup at buckets 1, 2,
    4 and the max batch 6), loaded by the real Triton in either backend of ours (python
    serves torch-compile): before the model is ready, each of its two instances ran zeros
    at every bucket as one batch, which the model's statistics count at once. On the CPU
    (the CUDA-graph runner needs a GPU) the torch runner runs them, on CPU instances (the
    config's load-time variant on a CPU node)."""
    work, _ = toy
    run = {**run_of(runner="torch-cudagraph", kind="gpu", max_batch=6, instances=2),
           "key": {"model": "toy", "backend": "ts-trace-cg"},
           "server": {"serve_with": serve_with}}
    repo = tmp_path / "repo"
    assert repository.create(run, work / "model.pt", repo, triton.backends, "warm") == \
        serve_with
    path = repo / "warm" / "config.pbtxt"
    config = triton_config.scenario_config(triton_config.read(path), on_cpu=True)
    config.parameters["runner"].string_value = "torch"
    triton_config.write(config, path)
    with TritonServer(triton, repo, tmp_path / "warm.log", "warm") as server:
        with grpcclient.InferenceServerClient(server.grpc_url) as client:
            stats = client.get_inference_statistics("warm").model_stats[0]
    batches = {b.batch_size: b.compute_infer.count for b in stats.batch_stats}
    assert batches == {1: 2, 2: 2, 4: 2, 6: 2}, stats
    assert stats.inference_count == 2 * (1 + 2 + 4 + 6), stats


# The pipeline's own tiny models, converted and checked by the real Snakemake, served by the
# C++ backend (TFT's ts-trace and aoti are measured in test_pipeline and test_compiled,
# FastPitch's ts-trace in test_models_e2e, each served by it); the ONNX ones by its ONNX
# Runtime engine.
SERVED_NATIVELY = ["results/bert-tiny/cpu/ts-trace_fp32", "results/bert-tiny/cpu/aoti_fp32",
                   "results/fastpitch-tiny/cpu/aoti_fp32", "results/bert-tiny/cpu/onnx_fp32",
                   "results/tft-tiny/cpu/onnx_fp32"]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The configurations' model repositories, and BERT's aoti measured offline (the real
    perf_analyzer through the C++ backend)."""
    work = tmp_path_factory.mktemp("served-natively")
    snakemake(work, *(f"{r}/model_repository" for r in SERVED_NATIVELY),
              "results/bert-tiny/cpu/aoti_fp32/offline.csv")
    return work


@pytest.mark.parametrize("run_dir", SERVED_NATIVELY)
def test_the_pipelines_models_served_natively_equal_their_in_process_runner(
        pipeline, settings, triton, run_dir):
    """BERT's, FastPitch's and TFT's evaluation sets through the real Triton and the C++
    backend: every output equals the in-process runner's (the native step's) within the
    conversion check's tolerance."""
    _, model, gpu, configuration = run_dir.split("/")
    run = settings.run(model, gpu, *configuration.split("_"))
    folder = pipeline / run_dir
    batch = run["model"]["accuracy"]["batch_size"]
    name = deployments.for_scenario(run, "accuracy", batch).name  # BERT's onnx: per batch
    config = triton_config.read(folder / "model_repository" / name / "config.pbtxt")
    assert triton_config.served_by(config) == cpp_backend.NAME
    assert triton_config.engine(config) == run["backend"]["runner"]
    inputs, _, _ = source_model.load_eval(run["model"],
                                          pipeline / f"results/{model}/source/eval.npz")
    expected = artifacts.of(run).runner(folder / "converted" / run["artifact"], run)(inputs)
    with TritonServer(triton, folder / "model_repository", folder / "check.log", name) \
            as server:
        served = infer_all(server.grpc_url, run, inputs, batch, name=name)
    for spec, got, want in zip(run["model"]["outputs"], served, expected):
        tol = tolerance(run["model"], run["precision"], spec["name"])
        np.testing.assert_allclose(got, want, atol=tol["atol"], rtol=tol["rtol"],
                                   err_msg=f"{run_dir}: {spec['name']}")
    if configuration == "aoti_fp32" and model == "bert-tiny":
        offline = pd.read_csv(folder / "offline.csv")
        assert set(offline["Served by"]) == {cpp_backend.NAME}, offline
        check_littles_law(offline, "offline")
