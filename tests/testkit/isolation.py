"""A measuring step run in a process of its own, as the isolation and lock tests start it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from testkit.toy_onnx import RUN

# e2e: each test that starts the real server (the windows' edges and the refused batch: none)
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
PERF = {"measurement_mode": "count_windows", "measurement_interval_ms": 1000,
        "stability_percentage": 1000, "max_trials": 3, "attempts": 1}


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data.json"
    data.write_text('{"data": [{"x": {"content": [0.5, 1.5, 2.5, 3.5], "shape": [4]}}]}')
    return data


# A measuring step in miniature, as deploybench.steps.run orders one: it takes the device
# lock (DEPLOYBENCH_LOCK_DIR, device STEP_DEVICE), then, optionally, isolates itself before
# any thread starts (numpy's would refuse it a user namespace), starts the server on the
# toy repository and runs perf_analyzer (system shared memory) for long enough to be
# killed, printing the server's ports, prefix and isolation first, its lock's record last.
STEP = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from deploybench.measurement import isolation, locks
    repo, work, isolate, requests = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    with locks.device_lock(os.environ.get("STEP_DEVICE", "isolation-test")) as held:
        state = isolation.isolate() if isolate == "yes" else {}
        from deploybench.triton import install, perf_analyzer
        from deploybench.triton.server import TritonServer
        run = json.loads(sys.argv[5])
        with TritonServer(install.prepare(), repo, work / "server.log", "toy",
                          keep_fds=(held.fd,)) as s:
            print(json.dumps({"ports": s.ports, "shm_dir": str(s.shm_dir), **state}), flush=True)
            run["model"]["offline"] = {"measurement_request_count": int(requests)}
            cmd = perf_analyzer.command(run, "offline", s, perf_analyzer.Row(4, 1, "system"),
                                        work / "data.json", work / "pa.csv")
            result = perf_analyzer.run_client(s, cmd)
        held.verify()
    print(json.dumps({"rc": result.returncode, "out": result.stdout[-2000:],
                      "lock": held.record}), flush=True)
""")


def _start_step(repo: Path, work: Path, isolate: bool, requests: int, env: dict | None = None,
                start=subprocess.Popen) -> subprocess.Popen:
    """STEP in a process of its own (`start`: how, e.g. conftest.unprivileged), its lock
    in `work`/locks unless `env` names another folder."""
    _data(work)
    run = {**RUN, "model": dict(RUN["model"]), "perf": PERF}
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), "DEPLOYBENCH_LOCK_DIR": str(work / "locks"),
           **(env or {})}
    Path(env["DEPLOYBENCH_LOCK_DIR"]).mkdir(mode=0o700, exist_ok=True)
    return start([sys.executable, "-c", STEP, str(repo), str(work), "yes" if isolate else "no",
                  str(requests), json.dumps(run)], stdout=subprocess.PIPE, text=True, env=env)


def _run(requests: int) -> dict:
    return {**RUN, "model": {**RUN["model"], "offline": {"measurement_request_count": requests}},
            "perf": {**PERF, "attempts": 3}}
