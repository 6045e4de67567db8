"""perf_analyzer's runs as the pipeline asks for them, none against a server: each scenario's
rows in the reference tables' order and the deployment each is sent to, the warm-up's
levels, the command line's window, protocol, shared memory and open-loop flags, and a run
of a real process ended by its time or memory limit."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from deploybench.triton import perf_analyzer
from deploybench.triton.perf_command import Row

PER_BATCH = {"deployments": "per_batch", "deployment_batches": [1, 4, 16],
             "max_batch_size": 16}
RUN = {"key": {"model": "m"}, "server": {"kind": "local"},
       "model": {"inputs": [{"name": "x", "dtype": "FP32", "dims": [4]}],
                 "outputs": [{"name": "y", "dtype": "FP32", "dims": [3]}],
                 "triton": PER_BATCH,
                 "offline": {"batch_sizes": [1, 4, 16], "shared_memory": ["system", "cuda"],
                             "measurement_request_count": 50, "warmup_windows": 2,
                             "warmup_levels": [[1, 1], ["max", 1]]},
                 "online": {"batch_size": 4, "concurrency": [1, 8, 32],
                            "measurement_request_count": 30, "measurement_mode": "time_windows",
                            "measurement_interval_ms": 800,
                            "warmup_levels": [["max", "max/2"]]}},
       "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 5000,
                "stability_percentage": 10, "max_trials": 10, "attempts": 3,
                "min_requests": 150}}
SERVER = SimpleNamespace(install=SimpleNamespace(perf_analyzer=Path("/pa")), version="",
                         grpc_url="localhost:8001", http_url="localhost:8000",
                         served_name=lambda name: f"served-{name}")


def test_offline_sweeps_each_mode_over_every_batch_each_sent_to_its_own_deployment():
    rows = perf_analyzer.sweep(RUN, "offline")
    assert rows == [Row(b, 1, mode, f"m_b{b}") for mode in ("system", "cuda")
                    for b in (1, 4, 16)]
    remote = perf_analyzer.sweep({**RUN, "server": {"kind": "remote"}}, "offline")
    assert [r.shared_memory for r in remote] == ["none"] * 3  # no memory shared with it


def test_online_sweeps_each_concurrency_at_its_batch_on_the_largest_deployment():
    assert perf_analyzer.sweep(RUN, "online") == [Row(4, c, "none", "m_b16")
                                                  for c in (1, 8, 32)]


def test_the_warm_up_runs_its_levels_in_each_mode_on_the_deployment_of_their_batch():
    """Offline [1, 1] and [max, 1]: batch 1 on m_b1 and 16 on m_b16, in each mode; online
    [max, max/2]: batch 4 at 16 clients (32 / 2)."""
    offline = perf_analyzer.warmup_rows(RUN, "offline", perf_analyzer.sweep(RUN, "offline"))
    assert offline == [Row(1, 1, "system", "m_b1"), Row(16, 1, "system", "m_b16"),
                       Row(1, 1, "cuda", "m_b1"), Row(16, 1, "cuda", "m_b16")]
    online = perf_analyzer.warmup_rows(RUN, "online", perf_analyzer.sweep(RUN, "online"))
    assert online == [Row(4, 16, "none", "m_b16")]
    default = {**RUN, "model": {**RUN["model"], "online": {
        k: v for k, v in RUN["model"]["online"].items() if k != "warmup_levels"}}}
    assert perf_analyzer.warmup_rows(default, "online", perf_analyzer.sweep(
        default, "online")) == [Row(4, 32, "none", "m_b16")]


def flags(cmd: list[str]) -> dict:
    return {cmd[i]: cmd[i + 1] for i in range(1, len(cmd) - 1) if cmd[i].startswith("-")}


def test_an_offline_command_in_system_shared_memory():
    """Count windows of 50 requests, doubled at the second attempt and by the warm-up's
    scale; the outputs' region: 16 x 3 FP32 = 192 bytes."""
    cmd = perf_analyzer.command(RUN, "offline", SERVER, Row(16, 1, "system", "m_b16"),
                                Path("d.json"), Path("o.csv"), attempt=2, scale=3)
    f = flags(cmd)
    assert cmd[0] == "/pa" and f["-m"] == "served-m_b16" and f["-b"] == "16"
    assert f["--concurrency-range"] == "1:1" and f["-i"] == "grpc"
    assert f["-u"] == "localhost:8001" and f["--measurement-mode"] == "count_windows"
    assert f["--measurement-request-count"] == str(50 * 3 * 2)
    assert (f["-s"], f["-r"], f["-f"]) == ("10", "10", "o.csv")
    assert (f["--shared-memory"], f["--output-shared-memory-size"]) == ("system", "192")
    assert "--verbose-csv" in cmd and "-v" in cmd and "--profile-export-file" not in cmd


def test_an_online_command_in_time_windows_over_http_with_the_export():
    cmd = perf_analyzer.command(RUN, "online", SERVER, Row(4, 8, "none", "m_b16"),
                                Path("d.json"), Path("o.csv"), attempt=3,
                                stability=1_000_000, export=Path("e.json"))
    f = flags(cmd)
    assert f["-p"] == str(800 * 4) and "--measurement-request-count" not in cmd
    assert (f["-i"], f["-u"], f["-s"]) == ("http", "localhost:8000", "1000000")
    assert f["--profile-export-file"] == "e.json" and "--shared-memory" not in cmd


def test_an_open_loop_command_and_a_batch_inside_the_tensors():
    row = Row(4, 0, "none", "m_b16", rate=250.5, distribution="poisson",
              shapes=(("keys", (64,)), ("n", (1,))), data="req.json")
    cmd = perf_analyzer.command(RUN, "online", SERVER, row, Path("d.json"), Path("o.csv"))
    f = flags(cmd)
    assert f["--request-rate-range"] == "250.5:250.5" and "--async" in cmd
    assert f["--request-distribution"] == "poisson" and "--concurrency-range" not in cmd
    assert f["-b"] == "1" and f["--input-data"] == "req.json"
    assert [a for a in cmd if a.startswith("--shape=")] == ["--shape=keys:64", "--shape=n:1"]


class Server(SimpleNamespace):
    def __init__(self):
        super().__init__(env=None, keep_fds=(), watchdog=None)


def test_a_run_gives_its_output_and_exit_code_and_ends_at_its_limits():
    done = perf_analyzer.run_client(Server(), [sys.executable, "-c",
                                               "import sys; print('out'); sys.exit(3)"])
    assert (done.returncode, done.stdout) == (3, "out\n")
    with pytest.raises(subprocess.TimeoutExpired) as late:
        perf_analyzer.run_client(Server(), [sys.executable, "-c", "import time, sys; "
                                            "print('began', flush=True); time.sleep(30)"],
                                 timeout_s=1.0)
    assert late.value.stdout == "began\n"
    grows = "import time; x = bytearray(300 * 2**20); time.sleep(30)"
    with pytest.raises(perf_analyzer.MemoryExceeded) as over:
        perf_analyzer.run_client(Server(), [sys.executable, "-c", grows], timeout_s=20,
                                 memory_limit=100 * 2**20)
    assert over.value.rss > 100 * 2**20


def test_the_export_memory_limit_and_why_a_tail_was_dropped(monkeypatch):
    """At most an eighth of the memory available: 4 GiB for the rate scenario, 1 GiB for
    the others' tail; a request's bytes named: 4 x 4 + 3 x 4 = 28 bytes at batch 1."""
    monkeypatch.setattr(perf_analyzer.psutil, "virtual_memory",
                        lambda: SimpleNamespace(available=64 * 2**30))
    assert perf_analyzer.export_limit("rate") == 4 * 2**30
    assert perf_analyzer.export_limit("online") == 2**30
    monkeypatch.setattr(perf_analyzer.psutil, "virtual_memory",
                        lambda: SimpleNamespace(available=16 * 2**30))
    assert perf_analyzer.export_limit("rate") == 2 * 2**30
    why = perf_analyzer.export_dropped(RUN, Row(1, 1, "none"), 3 * 2**30)
    assert "28 bytes of inputs and outputs each" in why and "grew past 3.0 GiB" in why


def test_the_warm_up_runs_each_level_once_any_spread_its_window_scaled(tmp_path,
                                                                       monkeypatch):
    """Offline warm-up windows 2: its four rows (test above) at 2 x 50 requests a window,
    -s ANY_SPREAD, each logged as discarded; none where warmup_windows is 0."""
    ran = []
    alive = []
    server = SimpleNamespace(**vars(SERVER), ensure_alive=lambda: alive.append(1))
    monkeypatch.setattr(perf_analyzer, "run_client", lambda s, cmd: ran.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    sweep = perf_analyzer.sweep(RUN, "offline")
    with open(tmp_path / "log", "w") as log:
        perf_analyzer.warm_up(RUN, "offline", server, sweep, tmp_path / "d.json", tmp_path, log)
    assert [(flags(c)["-b"], flags(c).get("--shared-memory")) for c in ran] == [
        ("1", "system"), ("16", "system"), ("1", "cuda"), ("16", "cuda")]
    assert {flags(c)["--measurement-request-count"] for c in ran} == {"100"}
    assert {flags(c)["-s"] for c in ran} == {str(perf_analyzer.ANY_SPREAD)}
    assert len(alive) == 4
    assert (tmp_path / "log").read_text().count("[warm-up, discarded] $ /pa") == 4
    ran.clear()
    cold = {**RUN, "model": {**RUN["model"], "offline": {**RUN["model"]["offline"],
                                                         "warmup_windows": 0}}}
    with open(tmp_path / "log", "w") as log:
        perf_analyzer.warm_up(cold, "offline", server, sweep, tmp_path / "d.json", tmp_path, log)
    assert ran == []
