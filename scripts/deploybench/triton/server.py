"""Start, use and always stop a real Triton Inference Server, driven by no one else.

`TritonServer` is a context manager: it binds the server to 127.0.0.1 on free ports (or
the configured ones, refused early when taken), starts it on a repository holding just
the models to serve, waits until they are loaded (`--model-control-mode=none`: loading
happens at start, from the pipeline's own files, and no client can load a model through
the API afterwards), and stops the server on exit, also when the body raises.

A measuring step runs it in network and mount namespaces of its own where the host
allows (deploybench.measurement.isolation): then no other local user can reach it at all. Else, what
other local users can and cannot do with it: the model-repository, trace and
logging APIs answer only requests that carry the run's key (`admin_headers`); inference,
metadata, model config, statistics and shared memory stay open (perf_analyzer needs them
over gRPC, which carries no custom header for it). The key is on the server's command
line, so a user who can read other users' processes can read it: it guards settings,
not code, since no model can be loaded through the API at all.

Shared memory is private to the server: with the install's shim preloaded, every POSIX
shared-memory name the server, its python-backend stubs and the perf_analyzer runs
given `env` open resolves to a file in this server's folder (`shm_dir`, mode 0700: no
other user can list, open or create a region there; perf_analyzer names its regions after
the tensors, the same in every process), and `stop` removes the folder, as `start`
removes the folders a killed run of this user left.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time
from contextlib import closing
from pathlib import Path

import psutil
import tritonclient.http as httpclient

from ..atomic import alive
from ..measurement.isolation import SHM
from .install import Install
from .watchdog import Watchdog

HPS_PS_CONFIG = "sparse.json"  # beside a Merlin HPS model's config.pbtxt
ADMIN_HEADER = "deploybench-admin"
RESTRICTED = "model-repository,trace,logging"
# A model's `triton.server` settings as tritonserver flags: memory options only, so that no
# setting can reopen what the command line restricts.
SERVER_FLAGS = {
    "pinned_memory_pool_byte_size": "--pinned-memory-pool-byte-size={}",
    "cuda_memory_pool_byte_size": "--cuda-memory-pool-byte-size=0:{}",
    "python_shm_default_byte_size": "--backend-config=python,shm-default-byte-size={}",
    "python_shm_growth_byte_size": "--backend-config=python,shm-growth-byte-size={}",
}


def server_flags(settings: dict) -> list[str]:
    """The flags of a model's `triton.server` settings (validated by the model schema)."""
    unknown = set(settings) - set(SERVER_FLAGS)
    if unknown:
        raise ValueError(f"unknown triton.server setting(s) {', '.join(sorted(unknown))}; "
                         f"valid: {', '.join(SERVER_FLAGS)}")
    return [SERVER_FLAGS[k].format(int(v)) for k, v in sorted(settings.items())]
SHM_DIR = Path(SHM)
_SHM_FOLDER = re.compile(r"^deploybench-(\d+)-[0-9a-f]+")  # of the step's pid


class ServerError(RuntimeError):
    """The server did not start, did not load the model, or died."""


def port_free(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out as free now (held open together so they differ)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def choose_ports(configured: dict | str) -> dict[str, int]:
    if configured == "auto":
        return dict(zip(("http", "grpc", "metrics"), free_ports(3), strict=True))
    for name, port in configured.items():
        if not port_free(port):
            raise ServerError(
                f"server.ports.{name}={port} is already in use on 127.0.0.1; "
                "free it, choose another port, or set server.ports: auto"
            )
    return dict(configured)


def remove_stale_shared_memory() -> list[str]:
    """This user's shared-memory folders (and regions of older versions, named with a
    prefix) of steps whose process is gone (a killed run)."""
    removed = []
    for path in SHM_DIR.glob("deploybench-*") if SHM_DIR.is_dir() else []:
        match = _SHM_FOLDER.match(path.name)
        if not match or alive(int(match.group(1))):
            continue
        try:
            st = path.lstat()
            if st.st_uid != os.getuid():
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path.name)
        except FileNotFoundError:
            pass
    return removed



def _exit_reason(code: int) -> str:
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit code {code}"


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_running = 0  # servers this process started and has not stopped


def _adopt_orphans(adopt: bool) -> None:
    """While this process runs a server, make it the parent of its descendants that lose
    theirs: the stubs of a killed server come here to be reaped, instead of waiting as
    zombies for an init that in a container may never reap them."""
    global _running
    _running += 1 if adopt else -1
    if _running == (1 if adopt else 0):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(adopt), 0, 0, 0)


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


class TritonServer:
    def __init__(
        self,
        install: Install,
        repository: Path,
        log_path: Path,
        model: str | None = None,
        *,
        ports: dict | str = "auto",
        start_timeout_s: float = 60.0,
        load_timeout_s: float = 300.0,
        flags: tuple[str, ...] = (),
        keep_fds: tuple[int, ...] = (),
    ):
        self.install = install
        self.repository = Path(repository).resolve()
        self.log_path = Path(log_path)
        self.model = model
        self.ports = choose_ports(ports)
        self.start_timeout_s = start_timeout_s
        self.load_timeout_s = load_timeout_s
        self.flags = tuple(flags)  # server_flags() of the served model's settings
        # Descriptors the server and the perf_analyzer runs inherit (a device lock's: it
        # stays held while any of them lives, also when the step is killed).
        self.keep_fds = tuple(keep_fds)
        self.admin_key = secrets.token_urlsafe(24)
        self.env = dict(install.env)
        self.shm_dir: Path | None = None  # made by start(), removed by stop()
        if install.shm_shim:
            self.shm_dir = SHM_DIR / f"deploybench-{os.getpid()}-{secrets.token_hex(8)}"
            preload = " ".join(p for p in (str(install.shm_shim), self.env.get("LD_PRELOAD"))
                               if p)
            self.env |= {"LD_PRELOAD": preload, "DEPLOYBENCH_SHM_DIR": str(self.shm_dir)}
        self._proc: subprocess.Popen | None = None
        self._log = None
        self.watchdog: Watchdog | None = None  # ends the server, stubs, perf_analyzer with us
        self._settings: dict = {}  # log and trace settings at start

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.ports['http']}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    @property
    def pid(self) -> int | None:
        """The server's process (its python-backend stubs are its children; with
        `server.kind: container` and docker, the docker client's, the server being the
        daemon's); None when not running."""
        return None if self._proc is None else self._proc.pid

    @property
    def pids(self) -> list[int | None]:
        """The process trees that serve (deploybench.measurement.telemetry samples them)."""
        return [self.pid]

    # The model version every request names (the pipeline's repositories hold version 1)
    version = "1"

    def served_name(self, name: str) -> str:
        """The model to send to for the deployment `name`: that one (the repository is ours)."""
        return name

    @property
    def admin_headers(self) -> dict[str, str]:
        """What the pipeline's own HTTP client sends to the restricted APIs."""
        return {ADMIN_HEADER: self.admin_key}

    @property
    def grpc_admin_headers(self) -> dict[str, str]:
        return {f"triton-grpc-protocol-{ADMIN_HEADER}": self.admin_key}

    def metrics(self) -> str:
        """The server's Prometheus metrics (text), including models' custom ones."""
        import urllib.request

        url = f"http://127.0.0.1:{self.ports['metrics']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    def _command(self) -> list[str]:
        # A Merlin HPS model reads its parameter-server config (deploybench.ensemble.hps).
        hps = sorted(self.repository.glob(f"*/{HPS_PS_CONFIG}"))
        extra = [f"--backend-config=hps,ps={hps[0]}"] if hps else []
        restricted = f"{RESTRICTED}:{ADMIN_HEADER}={self.admin_key}"
        return self.install.server_command(
            *extra,
            f"--model-repository={self.repository}",
            f"--backend-directory={self.install.backend_dir}",
            "--model-control-mode=none",
            "--strict-readiness=true",
            "--exit-on-error=true",
            "--exit-timeout-secs=10",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            f"--http-port={self.ports['http']}",
            f"--grpc-port={self.ports['grpc']}",
            f"--metrics-port={self.ports['metrics']}",
            f"--http-restricted-api={restricted}",
            f"--grpc-restricted-protocol={restricted}",
            "--log-verbose=0",
            *self.flags,
        )

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def ensure_alive(self) -> None:
        """Raise if the server process has ended: with how it ended and its log."""
        code = None if self._proc is None else self._proc.poll()
        if self._proc is None or code is not None:
            raise ServerError(
                f"tritonserver died ({_exit_reason(code) if code is not None else 'not running'})"
                f"; log {self.log_path}:\n{self.log_tail()}")

    def _ended_while_starting(self) -> ServerError:
        code = self._proc.returncode
        log = self.log_tail()
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        reasons = [line for line in text.splitlines()
                   if "failed to load '" in line or "Poll failed for model directory" in line]
        if self.model and reasons:
            return ServerError(f"Triton failed to load model '{self.model}' from "
                               f"{self.repository} (tritonserver {_exit_reason(code)}):\n"
                               + "\n".join(reasons) + f"\nlog {self.log_path}:\n{log}")
        return ServerError(f"tritonserver {_exit_reason(code)} while starting; "
                           f"log {self.log_path}:\n{log}")

    def start(self) -> TritonServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_shared_memory()
        self._log = open(self.log_path, "w")
        if self.shm_dir:  # a new folder (mkdir fails on any name that exists), ours alone
            self.shm_dir.mkdir(mode=0o700)
        self.watchdog = Watchdog([str(self.shm_dir)] if self.shm_dir else [])
        self._proc = subprocess.Popen(
            self._command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            pass_fds=self.keep_fds,
            start_new_session=True,  # so stop() can signal the server and its stubs together
        )
        self.watchdog.add(self._proc.pid)  # its process group
        _adopt_orphans(True)  # undone by stop(), which runs whenever _proc is set
        # closed at once: an open connection makes the server's stop wait its exit timeout
        with closing(httpclient.InferenceServerClient(self.http_url)) as client:
            self._wait(client.is_server_live, self.start_timeout_s, "live")
            # Strict readiness: ready once every model of the repository is loaded.
            self._wait(client.is_server_ready, self.load_timeout_s, "ready (models loaded)")
            if self.model and not client.is_model_ready(self.model):
                raise ServerError(f"model '{self.model}' is not ready after loading; "
                                  f"log {self.log_path}:\n{self.log_tail()}")
        self._settings = self.settings()
        return self

    def settings(self) -> dict:
        """The server's log and trace settings (restricted APIs: asked with the run's key)."""
        with closing(httpclient.InferenceServerClient(self.http_url)) as client:
            return {"log": client.get_log_settings(headers=self.admin_headers),
                    "trace": client.get_trace_settings(headers=self.admin_headers)}

    def settings_changed(self) -> dict:
        """The settings someone changed since the server started (`{name: [then, now]}`):
        the pipeline never changes them, and a verbose log or a trace slows a measurement."""
        now = self.settings()
        return {f"{api}.{name}": [self._settings[api].get(name), value]
                for api in now for name, value in now[api].items()
                if self._settings[api].get(name) != value}

    def _wait(self, check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise self._ended_while_starting()
            try:
                if check():
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.05)  # a start takes about 1.5 s: a coarser poll adds a tenth
        raise ServerError(f"tritonserver not {what} after {timeout_s:.0f} s; "
                          f"log {self.log_path}:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the server and its python-backend stubs, then remove the shared memory they
        leave. A server that is a process of ours is killed with its process group: nothing
        is read from it after its measurement, and Triton's orderly unload only waits (it
        polls its models once a second: 2.7 s a server with a python-backend model). A
        container's is stopped in order: the docker client passes SIGTERM on, not SIGKILL."""
        if self._proc is not None:
            group = self._proc.pid  # the server's, its stubs' (start_new_session)
            stubs = [p.pid for p in _children(group) if _group_of(p.pid) == group]
            if self.install.launcher and self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
            try:  # the server and its stubs (a container's that outlived its stop)
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
            for pid in stubs:  # handed to this process (_adopt_orphans): reaped here
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:  # reaped already, or another process's child
                    pass
            _adopt_orphans(False)
        if self._log is not None:
            self._log.close()
        if self.shm_dir:  # with what a stub or a killed perf_analyzer left in it
            shutil.rmtree(self.shm_dir, ignore_errors=True)
        if self.watchdog is not None:
            self.watchdog.close()
            self.watchdog = None
        self._proc = None

    def __enter__(self) -> TritonServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
