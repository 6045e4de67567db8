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

import os
import secrets
import shutil
import signal
import subprocess
import time
from contextlib import closing
from pathlib import Path

import tritonclient.http as httpclient

from .host import (
    SHM_DIR,
    adopt_orphans,
    end_group,
    free_ports,
    port_free,
    remove_stale_shared_memory,
)
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


class ServerError(RuntimeError):
    """The server did not start, did not load the model, or died."""


def _shm_folder(install: Install, env: dict) -> Path | None:
    """The server's shared-memory folder where the install has the shim, put in `env` with
    the shim preloaded (None: the server's regions stay in /dev/shm)."""
    if not install.shm_shim:
        return None
    folder = SHM_DIR / f"deploybench-{os.getpid()}-{secrets.token_hex(8)}"
    preload = " ".join(p for p in (str(install.shm_shim), env.get("LD_PRELOAD")) if p)
    env |= {"LD_PRELOAD": preload, "DEPLOYBENCH_SHM_DIR": str(folder)}
    return folder


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


def command(install: Install, repository: Path, ports: dict[str, int], admin_key: str,
            flags: tuple[str, ...]) -> list[str]:
    """The server's command line: bound to 127.0.0.1, the repository loaded at start and no
    model loaded through the API, the restricted APIs behind the run's key."""
    # A Merlin HPS model reads its parameter-server config (deploybench.ensemble.hps).
    hps = sorted(repository.glob(f"*/{HPS_PS_CONFIG}"))
    extra = [f"--backend-config=hps,ps={hps[0]}"] if hps else []
    restricted = f"{RESTRICTED}:{ADMIN_HEADER}={admin_key}"
    return install.server_command(
        *extra,
        f"--model-repository={repository}",
        f"--backend-directory={install.backend_dir}",
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--exit-on-error=true",
        "--exit-timeout-secs=10",
        "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1",
        "--metrics-address=127.0.0.1",
        f"--http-port={ports['http']}",
        f"--grpc-port={ports['grpc']}",
        f"--metrics-port={ports['metrics']}",
        f"--http-restricted-api={restricted}",
        f"--grpc-restricted-protocol={restricted}",
        "--log-verbose=0",
        *flags,
    )


def log_tail(log_path: Path, lines: int = 30) -> str:
    if not log_path.exists():
        return ""
    return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])


def _ended_while_starting(code: int, log_path: Path, model: str | None,
                          repository: Path) -> ServerError:
    """The error of a server that ended while it started: the models it failed to load."""
    log = log_tail(log_path)
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    reasons = [line for line in text.splitlines()
               if "failed to load '" in line or "Poll failed for model directory" in line]
    if model and reasons:
        return ServerError(f"Triton failed to load model '{model}' from {repository} "
                           f"(tritonserver {_exit_reason(code)}):\n" + "\n".join(reasons)
                           + f"\nlog {log_path}:\n{log}")
    return ServerError(f"tritonserver {_exit_reason(code)} while starting; "
                       f"log {log_path}:\n{log}")


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit code {code}"


class Endpoints:
    """A server of ours as its clients reach it: its addresses (`ports`), the model and
    version a request names, its metrics, the key of its restricted APIs (`admin_key`) and
    the log and trace settings they hold (TritonServer sets the attributes)."""

    ports: dict[str, int]
    admin_key: str
    _settings: dict  # log and trace settings at start

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.ports['http']}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

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


class TritonServer(Endpoints):
    """A Triton server the pipeline starts, on free ports (or the configured ones), loaded
    with the repository at start, always stopped with its stubs and shared memory."""

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
        self.shm_dir = _shm_folder(install, self.env)  # made by start(), removed by stop()
        self._proc: subprocess.Popen | None = None
        self._log = None
        self.watchdog: Watchdog | None = None  # ends the server, stubs, perf_analyzer with us
        self._settings: dict = {}  # log and trace settings at start

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

    def _command(self) -> list[str]:
        return command(self.install, self.repository, self.ports, self.admin_key, self.flags)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def ensure_alive(self) -> None:
        """Raise if the server process has ended: with how it ended and its log."""
        code = None if self._proc is None else self._proc.poll()
        if self._proc is None or code is not None:
            raise ServerError(
                f"tritonserver died ({_exit_reason(code) if code is not None else 'not running'})"
                f"; log {self.log_path}:\n{self.log_tail()}")

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
        adopt_orphans(True)  # undone by stop(), which runs whenever _proc is set
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

    def _wait(self, check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise _ended_while_starting(self._proc.returncode, self.log_path, self.model,
                                            self.repository)
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
            end_group(self._proc, orderly=bool(self.install.launcher))
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
