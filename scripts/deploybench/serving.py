"""A running Triton with a run's model loaded, for the steps that measure on it
(accuracy, offline, online): device check, install, scenario, server, provenance."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from contextlib import closing, contextmanager
from pathlib import Path

import tritonclient.http as httpclient

from . import artifacts, device, layout, locks, provenance
from .triton import config as triton_config
from .triton import install
from .triton.server import TritonServer, server_flags


def archive(*paths: Path) -> None:
    """Keep a dated copy of a finished measurement under history/: Snakemake deletes a
    job's old outputs when it re-runs it, and a failed re-run must not lose them."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime(layout.STAMP_FORMAT)
    for path in paths:
        dest = layout.history_copy(path, stamp)
        dest.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, dest)


@contextmanager
def served(run: dict, config_pbtxt: Path, server_log: Path, static_batching: bool = False):
    """A running server with the run's repository loaded (every deployment of it), ready
    to serve the model of `config_pbtxt`; yields (server, provenance)."""
    checked = device.check(run["gpu"], run["allow_gpu_mismatch"])
    triton = install.for_server(run["server"])
    cfg = run["server"]
    repo = Path(config_pbtxt).parent.parent
    # A CPU node standing in for a GPU key (allow_gpu_mismatch) serves on its CPU.
    on_cpu = checked["mismatch_allowed"] and not checked["devices"]
    with locks.device_lock(device.measured_device(checked)) as held, \
            tempfile.TemporaryDirectory(prefix=".scenario-", dir=repo.parent) as scratch:
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
                           "device_lock": held.record}


def cache_report(server: TritonServer) -> dict:
    """The sparse model's hit-rate counters of an ensemble (empty for a single model)."""
    return artifacts.cache_report(server.metrics())
