"""A Triton someone else started and keeps running (`server.kind: remote`).

The pipeline sends it inferences and reads its metadata, model config, statistics and
metrics, and nothing else: it never starts, loads, unloads or stops a model or the server,
so a measurement of a production server leaves it as it found it. perf_analyzer and the
clients run here (the embedded install's perf_analyzer). `RemoteServer` has what the
measuring steps use of a `TritonServer`: URLs, the name and version to send to, the
environment perf_analyzer runs in, `ensure_alive`, `metrics`.
"""

from __future__ import annotations

import urllib.request
from contextlib import closing

import tritonclient.http as httpclient
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from .install import Install
from .server import ServerError


class RemoteServer:
    """The remote server of a run's `server.remote` settings, serving `model` (default:
    the configuration's model key) at `version` ("" : the server's latest)."""

    keep_fds: tuple = ()  # no descriptor of ours to pass to perf_analyzer
    flags: tuple = ()  # no server flags: it is not ours to start
    pids: list = []  # no process here to sample (deploybench.measurement.telemetry)

    def __init__(self, settings: dict, install: Install, model_key: str):
        self.http_url, self.grpc_url = settings["http_url"], settings["grpc_url"]
        self.metrics_url = settings.get("metrics_url")
        self.model = settings.get("model") or model_key
        self.version = str(settings.get("version") or "")
        self.install = install
        self.env = dict(install.env)

    def served_name(self, name: str) -> str:
        """The model to send to for the configuration's deployment `name`: the remote
        model, whichever deployment a scenario would pick on a server of ours."""
        return self.model

    def _client(self):
        return closing(httpclient.InferenceServerClient(self.http_url))

    def ensure_alive(self) -> None:
        """Raise unless the server answers and has the model ready."""
        try:
            with self._client() as client:
                live = client.is_server_live()
                ready = live and client.is_model_ready(self.model, self.version)
        except (InferenceServerException, OSError) as err:
            raise ServerError(f"remote Triton at {self.http_url} does not answer: {err}") from None
        if not ready:
            raise ServerError(f"remote Triton at {self.http_url} is "
                              + (f"live but model '{self.model}' (version "
                                 f"{self.version or 'latest'}) is not ready" if live
                                 else "not live"))

    def config(self) -> mc.ModelConfig:
        """The served model's config, as the server reports it."""
        with self._client() as client:
            found = client.get_model_config(self.model, self.version)
        return json_format.ParseDict(found, mc.ModelConfig(), ignore_unknown_fields=True)

    def check_inputs(self, wanted: list[str]) -> mc.ModelConfig:
        """The served config, once its inputs were found to include `wanted` (the
        configuration's): a remote model of another interface is refused before any
        request is sent."""
        self.ensure_alive()
        config = self.config()
        has = [t.name for t in config.input]
        missing = [name for name in wanted if name not in has]
        if missing:
            raise ServerError(f"remote model '{self.model}' at {self.http_url} takes inputs "
                              f"{has}; the configuration sends {wanted} ({missing} missing): "
                              "set server.remote.model to a deployment of this configuration")
        return config

    def settings_changed(self) -> dict:
        """Nothing to compare: its log and trace settings are its owner's, not ours."""
        return {}

    def metadata(self) -> dict:
        with self._client() as client:
            return client.get_server_metadata()

    def metrics(self) -> str:
        """The server's Prometheus metrics where server.remote.metrics_url is set, else ""."""
        if not self.metrics_url:
            return ""
        url = self.metrics_url if "://" in self.metrics_url else f"http://{self.metrics_url}"
        with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=10) as response:
            return response.read().decode()

    def describe(self, config: mc.ModelConfig) -> dict:
        """The provenance's server entry: where it ran and that nothing here started it."""
        return {"kind": "remote", "http_url": self.http_url, "grpc_url": self.grpc_url,
                "model": self.model, "version": self.version or "latest",
                "started_by": "someone else: the pipeline started, loaded and stopped nothing",
                "served_by": config.backend or config.platform,
                "max_batch_size": config.max_batch_size,
                "dynamic_batching": config.HasField("dynamic_batching"),
                "instance_groups": [{"count": g.count, "kind": mc.ModelInstanceGroup.Kind.Name(
                    g.kind)} for g in config.instance_group],
                "perf_analyzer": str(self.install.perf_analyzer)}
