"""A measurement's server against the host's other users and against its own step's
death: the namespaces a serving step moves into (deploybench.measurement.isolation), the watchdog
that ends the server, its stub and perf_analyzer with the step, and the requests and
settings changes a level records when it runs on the host's loopback."""

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from deploybench.sweeps import level
from deploybench.triton import install, perf_analyzer
from deploybench.triton.server import TritonServer
from testkit.isolation import PERF, SCRIPTS, _data, _run, _start_step
from testkit.toy_onnx import RUN
from testkit.users import unprivileged


def _tree(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def test_a_killed_step_leaves_no_server_stub_perf_analyzer_or_shared_memory(toy_repo,  # noqa: F811
                                                                          tmp_path):
    """kill -9 of a measuring step (the OOM killer's signal) used to leave tritonserver,
    its stub and perf_analyzer running, their shared memory in /dev/shm, and the next
    measurement beside them. Now all of it ends within moments, and the lock is free."""
    work, _ = toy_repo
    step = _start_step(work / "repo", tmp_path, isolate=False, requests=1_000_000)
    started = json.loads(step.stdout.readline())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        names = {p.name() for p in _tree(step.pid)}
        if "perf_analyzer" in names and any("stub" in n for n in names):
            break
        time.sleep(0.1)
    spawned = _tree(step.pid)
    assert {"tritonserver", "perf_analyzer"} <= {p.name() for p in spawned}
    folder = Path(started["shm_dir"])
    assert list(folder.iterdir())  # the stub's region, perf_analyzer's
    os.kill(step.pid, signal.SIGKILL)
    step.wait()
    gone, alive = psutil.wait_procs(spawned, timeout=10)
    assert not alive, [(p.pid, p.name()) for p in alive]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and folder.exists():
        time.sleep(0.1)
    assert not folder.exists()
    # the next measurement takes the device at once
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS),
           "DEPLOYBENCH_LOCK_DIR": str(tmp_path / "locks"), "DEPLOYBENCH_LOCK_TIMEOUT_S": "2"}
    taken = subprocess.run([sys.executable, "-c", "from deploybench.measurement import locks\n"
                            "with locks.device_lock('isolation-test') as h: print(h.record)"],
                           env=env, capture_output=True, text=True)
    assert taken.returncode == 0, taken.stderr


def _unreachable(started: dict) -> tuple[list[int], list[str]]:
    """What of an isolated step this process finds from the host's namespaces: the
    server's ports it can connect to, its shared-memory folder in /dev/shm."""
    found = []
    for port in sorted(started["ports"].values()):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            found.append(port)
        except OSError:
            pass
    return found, [n for n in os.listdir("/dev/shm") if n == Path(started["shm_dir"]).name]


def test_an_isolated_measurement_is_out_of_other_users_reach(toy_repo, tmp_path,  # noqa: F811
                                                             other_user):
    """A step that isolates itself serves on a loopback of its own and keeps its shared
    memory in a /dev/shm of its own: another user finds no port to connect to (inference,
    shared-memory registration, log settings) and nothing to list, open or create; the
    measurement ends as it would alone."""
    work, _ = toy_repo
    step = _start_step(work / "repo", tmp_path, isolate=True, requests=3000)
    started = json.loads(step.stdout.readline())
    assert started["network"].startswith("a namespace of its own"), started
    assert started["shared_memory"].startswith("a /dev/shm of its own"), started
    assert "user_namespace" not in started  # root's: the host's own namespaces
    probe = textwrap.dedent(f"""
        import os, socket, sys
        found = []
        for port in {sorted(started["ports"].values())}:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                found.append(port)
            except OSError:
                pass
        shm = [n for n in os.listdir("/dev/shm") if n == "{Path(started["shm_dir"]).name}"]
        print(found, shm)
        sys.exit(1 if found or shm else 0)
    """)
    tries = 0
    while step.poll() is None and tries < 20:  # while it measures
        seen = other_user(["python3", "-c", probe])
        assert seen.returncode == 0, seen.stdout + seen.stderr
        tries += 1
    assert tries > 0
    ended = json.loads(step.stdout.readline())
    assert step.wait() == 0 and ended["rc"] == 0, ended["out"]
    assert perf_analyzer.foreign_requests(ended["out"], perf_analyzer.Row(4, 1, "system"),
                                          {"p99 latency (ms)": 0.0}) == 0


def test_an_unprivileged_users_measurement_is_isolated_by_a_user_namespace(
        toy_repo, tmp_path, other_user):  # noqa: F811
    """A step without CAP_SYS_ADMIN (here a user other than root, every capability
    dropped) used to run on the host's loopback and /dev/shm, where any other user could
    list its regions and send it requests. It now makes a user namespace of its own first,
    and in it a network and a /dev/shm of its own: root, from the host's, finds no port of
    its server open and no region of it while it measures; what it records names the user
    namespace; the measurement ends as it would alone."""
    work, _ = toy_repo
    home = Path(tempfile.mkdtemp(prefix="deploybench-unprivileged-", dir="/tmp"))
    try:
        shutil.copytree(work / "repo", home / "repo")
        (home / "locks").mkdir(mode=0o700)
        subprocess.run(["chown", "-R", f"{other_user.uid}:{other_user.gid}", str(home)],
                       check=True)
        # its own install (the toy model is the python backend's: no C++ backend built)
        env = {"HOME": str(home), "DEPLOYBENCH_CACHE": str(home / "cache"),
               "CXX": str(home / "no-compiler")}
        step = _start_step(home / "repo", home, isolate=True, requests=1000, env=env,
                           start=functools.partial(unprivileged, other_user))
        started = json.loads(step.stdout.readline() or "{}")
        assert re.match(rf"its own \(uid {other_user.uid}, gid {other_user.gid} mapped to "
                        r"themselves alone\), since the host's namespaces need CAP_SYS_ADMIN: "
                        r".*unshare\(CLONE_NEWNET\): Operation not permitted",
                        started.get("user_namespace", "")), started
        assert started["network"].startswith("a namespace of its own"), started
        assert started["shared_memory"].startswith("a /dev/shm of its own"), started
        tries = 0
        while step.poll() is None and tries < 20:  # while it measures
            assert _unreachable(started) == ([], []), started
            tries += 1
            time.sleep(0.1)
        assert tries > 0
        ended = json.loads(step.stdout.readline())
        assert step.wait() == 0 and ended["rc"] == 0, ended["out"]
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=True)


def test_foreign_inference_and_a_changed_log_level_flag_a_level(toy_repo, tmp_path,  # noqa: F811
                                                                other_user):
    """On the host's loopback and /dev/shm (where namespaces are refused), the server's
    shared memory is a folder the other user can neither list, read nor create in; what
    that user sends during a level is counted (the server's requests against
    perf_analyzer's) and a log level switched on with a stolen key is recorded: either
    flags the level."""
    work, _ = toy_repo
    data = _data(tmp_path)
    run = {**RUN, "model": {**RUN["model"], "offline": {"measurement_request_count": 400}},
           "perf": PERF}
    with TritonServer(install.prepare(), work / "repo", tmp_path / "s.log", "toy") as server:
        body = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                       "data": [1, 2, 3, 4]}]})
        flood = textwrap.dedent(f"""
            import time, urllib.request
            end = time.monotonic() + 20
            while time.monotonic() < end:
                urllib.request.urlopen(urllib.request.Request(
                    "http://{server.http_url}/v2/models/toy/infer", data={body!r}.encode(),
                    headers={{"Content-Type": "application/json"}})).read()
        """)
        # its shared memory: a folder of its own, which the other user cannot list, read
        # (the stub's region is there) or create in
        region = next(server.shm_dir.iterdir())
        tried = other_user(["python3", "-c", textwrap.dedent(f"""
            import os
            for act in (lambda: os.listdir({str(server.shm_dir)!r}),
                        lambda: open({str(region)!r}, "rb"),
                        lambda: open({str(server.shm_dir / "x_0_0")!r}, "wb")):
                try:
                    act()
                    print("allowed")
                except PermissionError:
                    print("refused")
        """)])
        assert tried.stdout.split() == ["refused"] * 3, tried.stdout + tried.stderr
        other = subprocess.Popen(["python3", "-c", flood], user=other_user.uid,
                                 group=other_user.gid, extra_groups=[])
        try:
            time.sleep(1)
            key = dict(server.admin_headers)
            other_user(["python3", "-c", textwrap.dedent(f"""
                import json, urllib.request
                urllib.request.urlopen(urllib.request.Request(
                    "http://{server.http_url}/v2/logging", method="POST",
                    data=json.dumps({{"log_verbose_level": 1}}).encode(), headers={key!r}))
            """)], check=True)
            with open(tmp_path / "perf.log", "w") as log:
                measured = perf_analyzer.measure(run, "offline", server,
                                                 perf_analyzer.Row(1, 1, "system"), data,
                                                 tmp_path, log)
            found = level.interference(server, [measured], {"contended": False})
        finally:
            other.kill()
            other.wait()
    assert measured[perf_analyzer.FOREIGN] > 0, measured
    assert found["contended"] and found["foreign_requests"] == measured[perf_analyzer.FOREIGN]
    assert found["server_settings_changed"]["log.log_verbose_level"] == [0, 1]


def test_a_killed_stub_is_named_at_once_not_retried(toy_repo, tmp_path):  # noqa: F811
    """A python-backend stub killed (the OOM killer's way) used to end, after retries, as
    'no stable measurement': now its death is the message, after one attempt."""
    work, _ = toy_repo
    data = _data(tmp_path)
    with TritonServer(install.prepare(), work / "repo", tmp_path / "s.log", "toy") as server:
        for stub in psutil.Process(server.pid).children(recursive=True):
            stub.kill()
        with open(tmp_path / "perf.log", "w") as log, \
                pytest.raises(perf_analyzer.PerfDeath, match="stub process of 'toy.*' died"):
            perf_analyzer.measure(_run(100), "offline", server,
                                  perf_analyzer.Row(1, 1, "system"), data, tmp_path, log)
    assert (tmp_path / "perf.log").read_text().count("$ ") == 1


def _killing(server, sig: signal.Signals) -> threading.Thread:
    """A thread that sends `sig` to the server's perf_analyzer half a second into its run."""
    def kill_when_running():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for proc in psutil.process_iter(["name", "environ"]):
                if proc.info["name"] == "perf_analyzer" and (proc.info["environ"] or {}).get(
                        "DEPLOYBENCH_SHM_DIR") == str(server.shm_dir):
                    time.sleep(0.5)
                    proc.send_signal(sig)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    return killer


def test_perf_analyzer_killed_by_a_signal_is_named(toy_repo, tmp_path):  # noqa: F811
    """perf_analyzer killed mid-level (here SIGBUS, what a full /dev/shm gives it) is
    reported as killed, with /dev/shm's free space, not as a level that did not settle."""
    work, _ = toy_repo
    data = _data(tmp_path)
    with TritonServer(install.prepare(), work / "repo", tmp_path / "s.log", "toy") as server:
        killer = _killing(server, signal.SIGBUS)
        with open(tmp_path / "perf.log", "w") as log, \
                pytest.raises(perf_analyzer.PerfDeath,
                              match=r"killed by SIGBUS: .*/dev/shm has \d+ bytes free"):
            perf_analyzer.measure(_run(1_000_000), "offline", server,
                                  perf_analyzer.Row(1, 1, "system"), data, tmp_path, log)
        killer.join()


def test_a_warm_up_killed_by_a_signal_fails_its_scenario(toy_repo, tmp_path):  # noqa: F811
    """The warm-up's perf_analyzer killed by a signal used to be ignored: the levels were
    measured unwarmed, nothing said so. Now the scenario fails, naming the signal and the
    warm-up's level."""
    work, _ = toy_repo
    data = _data(tmp_path)
    run = _run(1_000_000)
    run["model"]["offline"]["warmup_windows"] = 2
    with TritonServer(install.prepare(), work / "repo", tmp_path / "s.log", "toy") as server:
        killer = _killing(server, signal.SIGKILL)
        with open(tmp_path / "perf.log", "w") as log, \
                pytest.raises(perf_analyzer.PerfDeath,
                              match=r"perf_analyzer was killed by SIGKILL, on the offline "
                                    r"warm-up at batch 1, concurrency 1, system shared memory"):
            perf_analyzer.warm_up(run, "offline", server, [perf_analyzer.Row(1, 1, "system")],
                                  data, tmp_path, log)
        killer.join()


FULL_SHM = textwrap.dedent("""
    import json, subprocess, sys
    from pathlib import Path
    from deploybench.measurement import isolation
    from deploybench.triton import install, perf_analyzer
    from deploybench.triton.server import TritonServer
    repo, work = Path(sys.argv[1]), Path(sys.argv[2])
    isolation.isolate()  # a /dev/shm of this step's own, made small, then filled
    subprocess.run(["mount", "-o", "remount,size=16m", "/dev/shm"], check=True)
    run = json.loads(sys.argv[3])
    with TritonServer(install.prepare(), repo, work / "server.log", "toy") as s:
        with open("/dev/shm/filler", "wb") as f:
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError:
                pass
        try:
            with open(work / "perf.log", "w") as log:
                perf_analyzer.measure(run, "offline", s, perf_analyzer.Row(4, 1, "system"),
                                      work / "data.json", work, log)
            print("measured")
        except perf_analyzer.PerfDeath as death:
            print(death)
""")


@pytest.mark.skipif(os.getuid() != 0, reason="a /dev/shm of a step's own, filled, needs root")
def test_a_full_dev_shm_is_named(toy_repo, tmp_path):  # noqa: F811
    """A full /dev/shm (here the step's own, made small and filled) kills perf_analyzer
    with SIGBUS as it writes its region: reported as that, with /dev/shm's free space,
    after one attempt, not as a level that did not settle."""
    work, _ = toy_repo
    _data(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS)}
    ran = subprocess.run([sys.executable, "-c", FULL_SHM, str(work / "repo"), str(tmp_path),
                          json.dumps(_run(100))], capture_output=True, text=True, env=env,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"perf_analyzer was killed by SIGBUS: .*/dev/shm has \d+ bytes free of "
                     r"16777216", ran.stdout), ran.stdout
    assert (tmp_path / "perf.log").read_text().count("$ ") == 1
