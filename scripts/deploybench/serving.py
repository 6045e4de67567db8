"""A running Triton with a run's model loaded, for the steps that measure on it
(accuracy, offline, online): device check, install, scenario, server, provenance."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from contextlib import closing, contextmanager
from pathlib import Path

import tritonclient.http as httpclient

from . import artifacts, atomic, layout
from .measurement import device, isolation, locks, provenance
from .triton import config as triton_config
from .triton import install
from .triton.perf_analyzer import FOREIGN
from .triton.remote import RemoteServer
from .triton.server import TritonServer, server_flags


def archive(*paths: Path) -> None:
    """Keep a dated copy of a finished measurement under history/: Snakemake deletes a
    job's old outputs when it re-runs it, and a failed re-run must not lose them."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime(layout.STAMP_FORMAT)
    for path in paths:
        # on disk before its name: a full disk leaves no short file that passes for a copy
        with atomic.output(layout.history_copy(path, stamp)) as tmp, \
                open(path, "rb") as src, open(tmp, "wb") as dest:
            shutil.copyfileobj(src, dest)
            dest.flush()
            os.fsync(dest.fileno())


@contextmanager
def served(run: dict, config_pbtxt: Path, server_log: Path, static_batching: bool = False):
    """A running server with the run's repository loaded (every deployment of it), ready
    to serve the model of `config_pbtxt`; yields (server, provenance). With server.kind
    remote, the server someone else runs, as it is (remote_served)."""
    if run["server"]["kind"] == "remote":
        with remote_served(run, config_pbtxt, server_log) as found:
            yield found
        return
    cfg = run["server"]
    repo = Path(config_pbtxt).parent.parent
    with device.claim(run) as claimed, \
            tempfile.TemporaryDirectory(prefix=".scenario-", dir=repo.parent) as scratch:
        checked, held = claimed.checked, claimed.held
        triton = install.for_server(cfg)  # after the claim: a docker server gets its GPU
        # A CPU node standing in for a GPU key (allow_gpu_mismatch) serves on its CPU.
        on_cpu = checked["mismatch_allowed"] and not checked["devices"]
        served_repo = artifacts.scenario(repo, Path(scratch) / "repository", static_batching,
                                         on_cpu)
        with TritonServer(triton, served_repo, server_log, Path(config_pbtxt).parent.name,
                          ports=cfg["ports"], start_timeout_s=cfg["start_timeout_s"],
                          load_timeout_s=cfg["load_timeout_s"],
                          flags=server_flags(  # memory options: none change a result
                              run["model"].get("triton", {}).get("server", {})),
                          keep_fds=(held.fd,)) as server:
            with closing(httpclient.InferenceServerClient(server.http_url)) as client:
                meta = client.get_server_metadata()
            described = {**triton.describe(),
                         "served_by": triton_config.served_by(triton_config.read(config_pbtxt))}
            if server.flags:
                described["server_flags"] = list(server.flags)
            parts = artifacts.served_parts(repo, config_pbtxt)
            if parts:
                described["ensemble_parts"] = parts
            yield server, {**provenance.collect(run, meta, checked, described),
                           "device_lock": held.record, "isolation": isolation.current()}


@contextmanager
def remote_served(run: dict, config_pbtxt: Path, server_log: Path):
    """The remote server of server.remote, its model checked to take the configuration's
    inputs; yields (server, provenance). The lock of its URL keeps two measurements of
    this host's users from sharing it; the GPU key is not checked (the device is not
    here): the provenance says which server measured and that it was not the pipeline's.
    Its telemetry and host load are this host's (the client's), its processes none. The
    step's server log says so in place of a log of a server of ours."""
    server = RemoteServer(run["server"]["remote"], install.prepare(), run["key"]["model"])
    Path(server_log).write_text(f"server.kind remote: no server started here; measured "
                                f"{server.http_url}, model '{server.model}'\n")
    config = server.check_inputs(triton_config.served_inputs(config_pbtxt))
    checked = {"gpu_key": run["gpu"]["key"], "devices": [], "mismatch_allowed": False,
               "not_checked": "server.kind remote: the server's device is not on this host"}
    with locks.device_lock(f"remote-{server.http_url}") as held:
        yield server, {**provenance.collect(run, server.metadata(), checked,
                                            server.describe(config)),
                       "device_lock": held.record}


def interference(server, runs: list[dict], load: dict) -> dict:
    """A level's host load (deploybench.measurement.host_load) with what reached its server besides
    the measurement: requests perf_analyzer did not send, changes to the server's log or
    trace settings. Either flags the level as contention does. (A server in a network
    namespace of its own, deploybench.measurement.isolation, can be reached by no one else.)"""
    counted = [r[FOREIGN] for r in runs if r.get(FOREIGN) is not None]
    changed = server.settings_changed()
    foreign = max(counted) if counted else None
    return {**load, "foreign_requests": foreign,
            **({"server_settings_changed": changed} if changed else {}),
            "contended": bool(load.get("contended") or foreign or changed)}


def executions_by_batch(server: TritonServer, model: str) -> dict[int, int]:
    """Triton's executions of `model` so far, by the batch size they ran at (its
    statistics: what the dynamic batcher formed, counted since the server started)."""
    with closing(httpclient.InferenceServerClient(server.http_url)) as client:
        stats = client.get_inference_statistics(server.served_name(model),
                                                 server.version)["model_stats"]
    return {int(b["batch_size"]): int(b["compute_infer"]["count"])
            for s in stats for b in s.get("batch_stats", [])}


def formed_since(server: TritonServer, model: str, before: dict[int, int]) -> dict[int, int]:
    """The executions by batch size since `before` (executions_by_batch then), nonzero."""
    now = executions_by_batch(server, model)
    return {b: n - before.get(b, 0) for b, n in sorted(now.items()) if n - before.get(b, 0)}


def cache_report(server: TritonServer) -> dict:
    """The sparse model's hit-rate counters of an ensemble (empty for a single model)."""
    return artifacts.cache_report(server.metrics())
