"""Start, use and always stop a real Triton Inference Server.

`TritonServer` is a context manager: it binds the server to 127.0.0.1 on free ports
(or the configured ones, refused early when taken), starts it in explicit model-control
mode, loads the model with a timeout (optionally with a config override, which is how
the offline scenario switches dynamic batching off), and stops the server on exit,
also when the body raises. The server log is kept at `log_path`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from contextlib import closing
from pathlib import Path

import tritonclient.http as httpclient

from .install import Install

HPS_PS_CONFIG = "sparse.json"  # beside a Merlin HPS model's config.pbtxt


class ServerError(RuntimeError):
    """The server did not start, or did not load the model."""


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


class TritonServer:
    def __init__(
        self,
        install: Install,
        repository: Path,
        log_path: Path,
        ports: dict | str = "auto",
        start_timeout_s: float = 60.0,
        load_timeout_s: float = 300.0,
    ):
        self.install = install
        self.repository = Path(repository).resolve()
        self.log_path = Path(log_path)
        self.ports = choose_ports(ports)
        self.start_timeout_s = start_timeout_s
        self.load_timeout_s = load_timeout_s
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.ports['http']}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

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
        return self.install.server_command(
            *extra,
            f"--model-repository={self.repository}",
            f"--backend-directory={self.install.backend_dir}",
            "--model-control-mode=explicit",
            "--strict-readiness=true",
            "--exit-timeout-secs=10",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            f"--http-port={self.ports['http']}",
            f"--grpc-port={self.ports['grpc']}",
            f"--metrics-port={self.ports['metrics']}",
            "--log-verbose=0",
        )

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def start(self) -> TritonServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self._proc = subprocess.Popen(
            self._command(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.install.env,
            start_new_session=True,  # so stop() can signal the server and its stubs together
        )
        client = httpclient.InferenceServerClient(self.http_url)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerError(
                    f"tritonserver exited with code {self._proc.returncode} while starting; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                if client.is_server_live():
                    return self
            except Exception:  # not listening yet
                pass
            time.sleep(0.2)
        raise ServerError(
            f"tritonserver not live after {self.start_timeout_s:.0f} s; "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def load(self, model: str, config_override: dict | None = None) -> None:
        """Load `model` (explicit mode), failing with the server's reason after the timeout."""
        client = httpclient.InferenceServerClient(
            self.http_url, network_timeout=self.load_timeout_s, connection_timeout=10.0
        )
        config = json.dumps(config_override) if config_override else None
        try:
            client.load_model(model, config=config)
        except Exception as err:
            raise ServerError(
                f"Triton failed to load model '{model}' from {self.repository}: {err}\n"
                f"server log {self.log_path}:\n{self.log_tail()}"
            ) from err
        if not client.is_model_ready(model):
            raise ServerError(f"model '{model}' loaded but is not ready; log {self.log_path}")

    def stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()  # the server unloads models and stops its stubs
                try:
                    self._proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
            try:  # python backend stubs that outlived the server
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        if self._log is not None:
            self._log.close()
        self._proc = None

    def __enter__(self) -> TritonServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
