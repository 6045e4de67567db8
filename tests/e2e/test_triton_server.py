"""The real Triton server on the toy ONNX model (tests/conftest.py's toy_repo): it serves
and always stops, refuses a port in use, reports why a model fails to load, merges requests
and gives each its outputs, keeps two measurements' shared memory apart, and lets no other
client change it."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from deploybench.measurement import locks
from deploybench.records.tables import THROUGHPUT
from deploybench.triton import config as triton_config
from deploybench.triton import install
from deploybench.triton.client import infer_all
from deploybench.triton.server import ServerError, TritonServer, server_flags
from testkit.toy_onnx import RUN


def test_server_serves_the_model_and_always_stops(toy_repo, monkeypatch):
    """...and holds the device lock it was handed for as long as it runs; its stop leaves
    neither the server nor its python-backend stub running, nor shared memory of theirs."""
    work, model = toy_repo
    monkeypatch.setenv("DEPLOYBENCH_LOCK_DIR", str(work / "locks"))
    with locks.device_lock("cpu") as held:
        server = TritonServer(install.prepare(), work / "repo", work / "server.log", "toy",
                              keep_fds=(held.fd,))
        with pytest.raises(RuntimeError, match="boom"), server:
            x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
            (y,) = infer_all(server.grpc_url, RUN, [x], batch_size=2)
            np.testing.assert_allclose(y, model(torch.from_numpy(x)).detach().numpy(),
                                       atol=1e-5)
            assert f"{server.pid} (tritonserver)" in locks.holders(held.fd)
            port, folder = server.ports["http"], server.shm_dir
            group = [server.pid, *(p.pid for p in psutil.Process(server.pid).children())]
            assert len(group) > 1 and list(folder.iterdir())  # a stub's region
            assert folder.stat().st_mode & 0o777 == 0o700
            raise RuntimeError("boom")
        assert server._proc is None and locks.holders(held.fd) == []
        assert not [pid for pid in group if psutil.pid_exists(pid)]  # nor a zombie
        assert not folder.exists()
    with socket.socket() as sock:  # the port is free again: the server is gone
        sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_refused_by_name(toy_repo):
    work, _ = toy_repo
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        ports = {"http": taken, "grpc": taken + 1, "metrics": taken + 2}
        with pytest.raises(ServerError, match=f"server.ports.http={taken} is already in use"):
            TritonServer(install.prepare(), work / "repo", work / "s.log", ports=ports)


def test_a_model_that_fails_to_load_reports_the_servers_reason(toy_repo):
    work, _ = toy_repo
    broken = work / "broken_repo" / "toy"
    shutil.copytree(work / "repo" / "toy", broken)  # model.py and the runners it imports
    (broken / "1" / "model.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(ServerError, match="failed to load model 'toy'") as failed:
        with TritonServer(install.prepare(), broken.parent, work / "broken.log", "toy"):
            pass
    assert "INVALID_PROTOBUF" in str(failed.value)  # ONNX Runtime's own reason, from the log


def test_a_models_memory_settings_reach_the_server(toy_repo):
    work, _ = toy_repo
    flags = server_flags({"pinned_memory_pool_byte_size": 12345678,
                          "python_shm_default_byte_size": 3 << 20})
    with TritonServer(install.prepare(), work / "repo", work / "flags.log", "toy",
                      flags=flags):
        pass
    log = (work / "flags.log").read_text()
    assert re.search(r"pinned_memory_pool_byte_size\s*\|\s*12345678\b", log)
    assert '"shm-default-byte-size":"3145728"' in log  # the python backend's config
    with pytest.raises(ValueError, match="unknown triton.server setting.*model_control_mode"):
        server_flags({"model_control_mode": "explicit"})


def _repo_with(work, name, **triton):
    """A copy of the toy repository whose config has these dynamic batcher settings."""
    repo = work / name
    if not repo.exists():
        shutil.copytree(work / "repo", repo)
        config = triton_config.read(repo / "toy" / "config.pbtxt")
        config.dynamic_batching.preferred_batch_size[:] = triton["preferred"]
        config.dynamic_batching.max_queue_delay_microseconds = triton["delay_us"]
        triton_config.write(config, repo / "toy" / "config.pbtxt")
    return repo


def test_requests_the_dynamic_batcher_merges_get_their_own_outputs(toy_repo):
    """Eight concurrent requests of different sizes, held by the batcher to be executed
    together: each gets the outputs of its own samples (the served model concatenates a
    merged batch and splits its outputs back)."""
    import tritonclient.grpc as grpcclient

    work, model = toy_repo
    repo = _repo_with(work, "batching_repo", preferred=[8], delay_us=500_000)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((1 + i % 2, 4)).astype(np.float32) for i in range(8)]
    with TritonServer(install.prepare(), repo, work / "batching.log", "toy") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        results = {}
        for i, x in enumerate(inputs):
            tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            client.async_infer("toy", [tensor], lambda result, error, i=i:
                               results.__setitem__(i, (result, error)))
        deadline = time.monotonic() + 30
        while len(results) < len(inputs) and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = client.get_inference_statistics("toy").model_stats[0]
    assert len(results) == len(inputs)
    for i, x in enumerate(inputs):
        result, error = results[i]
        assert error is None, error
        np.testing.assert_allclose(result.as_numpy("y"), model(torch.from_numpy(x)).detach(),
                                   atol=1e-5)
    assert stats.inference_count == sum(len(x) for x in inputs)
    assert stats.execution_count < len(inputs)  # some requests were executed together


def test_a_dead_server_is_reported_with_its_signal_and_not_retried(toy_repo, tmp_path):
    from deploybench.triton import perf_analyzer

    work, _ = toy_repo
    data = tmp_path / "data.json"
    data.write_text('{"data": [{"x": {"content": [0.5, 1.5, 2.5, 3.5], "shape": [4]}}]}')
    run = {**RUN, "model": {**RUN["model"], "offline": {"measurement_request_count": 50}},
           "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 1000,
                    "stability_percentage": 50, "max_trials": 5, "attempts": 3}}
    log = tmp_path / "perf.log"
    with TritonServer(install.prepare(), work / "repo", tmp_path / "server.log", "toy") as server:
        os.kill(server._proc.pid, signal.SIGKILL)
        server._proc.wait()
        with open(log, "w") as f, pytest.raises(ServerError, match="killed by signal SIGKILL"):
            perf_analyzer.measure(run, "offline", server, perf_analyzer.Row(1, 1, "system"),
                                  data, tmp_path, f)
    assert "$ " not in log.read_text()  # no perf_analyzer run against the dead server


def _offline_command(server, batch: int, data, csv) -> list[str]:
    from deploybench.triton import perf_analyzer

    run = {**RUN, "model": {**RUN["model"], "offline": {"measurement_request_count": 200}},
           "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 3000,
                    "stability_percentage": 100, "max_trials": 10, "attempts": 1}}
    return perf_analyzer.command(run, "offline", server,
                                 perf_analyzer.Row(batch, 1, "system"), data, csv)


def test_two_measurements_at_once_keep_their_shared_memory_apart(toy_repo, tmp_path):
    """perf_analyzer names its system shared memory after the tensors; two offline runs
    at once (two servers, other batch sizes) used to resize each other's regions until a
    server died of SIGBUS. Each server's regions live in its own folder, both runs finish,
    and nothing is left in /dev/shm afterwards."""
    work, _ = toy_repo
    data = tmp_path / "data.json"
    data.write_text('{"data": [{"x": {"content": [0.5, 1.5, 2.5, 3.5], "shape": [4]}}]}')
    triton = install.prepare()
    assert triton.shm_shim is not None and triton.shm_shim.is_file()
    with TritonServer(triton, work / "repo", tmp_path / "a.log", "toy") as a, \
            TritonServer(triton, work / "repo", tmp_path / "b.log", "toy") as b:
        assert a.shm_dir != b.shm_dir
        runs = [subprocess.Popen(_offline_command(s, batch, data, tmp_path / f"{batch}.csv"),
                                 env=s.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True) for s, batch in ((a, 1), (b, 8))]
        seen = {a.shm_dir: set(), b.shm_dir: set()}
        while any(r.poll() is None for r in runs):
            for folder, names in seen.items():
                names |= {p.name for p in folder.iterdir()}
            time.sleep(0.05)
        outputs = [r.communicate()[0] for r in runs]
        a.ensure_alive()
        b.ensure_alive()
    assert [r.returncode for r in runs] == [0, 0], outputs
    for folder, names in seen.items():  # each run's tensors in its own server's folder
        assert {n for n in names if "x_0_" in n or n.endswith("y")}, (folder, names)
        assert not folder.exists()


def test_a_killed_runs_shared_memory_is_removed_by_the_next_server(toy_repo, tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = Path("/dev/shm") / f"deploybench-{int(gone.stdout)}-0123abcd"
    stale.mkdir(mode=0o700)
    (stale / "x_0_0").write_bytes(b"left by a run that was killed")
    work, _ = toy_repo
    with TritonServer(install.prepare(), work / "repo", tmp_path / "s.log", "toy"):
        assert not stale.exists()


def test_another_client_can_neither_load_a_model_nor_change_the_servers_settings(toy_repo,
                                                                                 tmp_path):
    """A local user who reaches the ports tries what ran code as the benchmark's user
    before: loading a python model whose files the request itself carries. Without the run's
    key the restricted APIs refuse (HTTP and gRPC); with it, a server that loads only at
    start still refuses; the payload never runs."""
    import json

    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    marker = tmp_path / "payload-ran"
    payload = f"open({str(marker)!r}, 'w').write('owned')\n".encode()
    config = json.dumps({"backend": "python", "max_batch_size": 0,
                         "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1]}],
                         "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}]})
    files = {"file:1/model.py": payload}
    work, _ = toy_repo
    with TritonServer(install.prepare(), work / "repo", tmp_path / "s.log", "toy") as server:
        http = httpclient.InferenceServerClient(server.http_url)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        with pytest.raises(InferenceServerException, match="restricted"):
            http.load_model("evil", config=config, files=files)
        with pytest.raises(InferenceServerException, match="restricted"):
            grpc.load_model("evil", config=config, files=files)
        with pytest.raises(InferenceServerException, match="restricted"):
            http.update_log_settings({"log_verbose_level": 1})
        with pytest.raises(InferenceServerException, match="restricted"):
            http.get_model_repository_index()
        # the run's own client, with the key: what it may ask, it gets; a load, never
        index = http.get_model_repository_index(headers=server.admin_headers)
        assert [(m["name"], m["state"]) for m in index] == [("toy", "READY")]
        with pytest.raises(InferenceServerException, match="not allowed"):
            http.load_model("evil", config=config, files=files, headers=server.admin_headers)
        with pytest.raises(InferenceServerException, match="not allowed"):
            grpc.load_model("evil", config=config, files=files,
                            headers=server.grpc_admin_headers)
        assert http.is_model_ready("toy") and not http.is_model_ready("evil")
    assert not marker.exists()


# the real Triton server and perf_analyzer
def test_a_profile_export_past_its_memory_is_dropped_and_the_level_measured_without_it(
        toy_repo, tmp_path, monkeypatch):
    """perf_analyzer's profile export holds every response in memory (a FastPitch level on
    an H100 grew it past 128 GiB): past its limit, perf_analyzer is killed and the level
    measured again without the export, which the row records."""
    from deploybench.sweeps.closed_loop import tail_columns
    from deploybench.triton import perf_analyzer

    work, _ = toy_repo
    data = tmp_path / "data.json"
    data.write_text('{"data": [{"x": {"content": [0.5, 1.5, 2.5, 3.5], "shape": [4]}}]}')
    run = {**RUN, "model": {**RUN["model"], "offline": {"measurement_request_count": 50}},
           "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 1000,
                    "stability_percentage": 100, "max_trials": 5, "attempts": 1}}
    export, log = tmp_path / "export.json", tmp_path / "perf.log"
    row = perf_analyzer.Row(1, 1, "none")
    with TritonServer(install.prepare(), work / "repo", tmp_path / "server.log", "toy") as server:
        with open(log, "w") as f:  # within its limit: kept
            kept = perf_analyzer.measure(run, "offline", server, row, data, tmp_path, f,
                                         export=export)
        assert perf_analyzer.EXPORT_DROPPED not in kept and export.stat().st_size > 0
        export.unlink()
        # where the export only adds the tail, any size is too big; the rate scenario,
        # which cannot do without it, keeps the larger cap
        monkeypatch.setattr(perf_analyzer, "TAIL_EXPORT_CAP", 1)
        assert perf_analyzer.export_limit("rate") > 2**20
        with open(log, "w") as f:
            dropped = perf_analyzer.measure(run, "offline", server, row, data, tmp_path, f,
                                            export=export)
    commands = [line for line in log.read_text().splitlines() if line.startswith("$ ")]
    assert len(commands) == 2 and "--profile-export-file" in commands[0]
    assert "--profile-export-file" not in commands[1] and not export.exists()
    assert "grew past" in dropped[perf_analyzer.EXPORT_DROPPED] and "[killed: " in log.read_text()
    assert dropped[THROUGHPUT] > 0 and dropped["Batch"] == 1
    # online.csv's tail columns: empty where a level has none
    columns = tail_columns([None, {"requests": 9, "seconds": 1.0, "percentiles_ms": {
        q: {"value": 1.0, "ci95": [0.9, 1.1]} for q in ("p50", "p90", "p95", "p99", "p99.9")}}],
        [0, 1])
    assert columns.iloc[0].isna().all() and columns.iloc[1].notna().all()
