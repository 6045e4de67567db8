"""A running Triton with a run's model loaded, for the steps that measure on it
(accuracy, offline, online, rate, floor): device check, install, scenario, server,
provenance; warmed up as a scenario measures it (warmed_server)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from . import artifacts
from .measurement import device, isolation, locks, provenance
from .records import atomic
from .settings import deployments
from .tensors import numpy_dtype
from .triton import config as triton_config
from .triton import install, perf_failures
from .triton.client import warm_up
from .triton.remote import RemoteServer
from .triton.server import TritonServer, server_flags

# A scenario's scratch model repository, beside the configuration's (links into it): removed
# when its server stops, on success or failure; .gitignore keeps one out of git all the same
SCRATCH = ".scenario-"


def scratch_folder(parent: Path) -> tempfile.TemporaryDirectory:
    """A scenario's scratch folder in `parent` (`.scenario-<pid>-*`), removed on leaving it
    however the step ends; the ones a killed step left (kill -9, a machine taken back: their
    process gone) are removed first, so that none stays to be copied with the results."""
    for stale in Path(parent).glob(f"{SCRATCH}*"):
        found = re.fullmatch(rf"{re.escape(SCRATCH)}(\d+)-.+", stale.name)
        if found and not atomic.alive(int(found.group(1))) and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"{SCRATCH}{os.getpid()}-", dir=parent)


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
    with (device.claim(run, count=device.deployment_gpus(run)) as claimed,
          scratch_folder(repo.parent) as scratch):
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
                          keep_fds=held.fds) as server:
            with closing(httpclient.InferenceServerClient(server.http_url)) as client:
                meta = client.get_server_metadata()
            described = {**triton.describe(),
                         "served_by": triton_config.served_by(triton_config.read(config_pbtxt))}
            if server.flags:
                described["server_flags"] = list(server.flags)
            parts = artifacts.served_parts(repo, config_pbtxt)
            if parts:
                described["ensemble_parts"] = parts
            described["engines"] = artifacts.engines(repo, config_pbtxt)
            yield server, {**provenance.collect(run, meta, checked, described),
                           "device_lock": held.record, "isolation": isolation.current()}
        # the server has stopped; its lock goes with the step (device.claim), once written
        held.record["used_until"] = time.time()


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


@contextmanager
def warmed_server(spec: dict, scenario: str, config_pbtxt: Path, sweep: list,
                  perf_data: Path, server_log: Path, work: Path,
                  instances: int | None = None) -> Iterator[tuple]:
    """The configuration's model served as the scenario measures it, every batch the sweep
    can send (or the dynamic batcher form) warmed up on every instance at once, twice, so
    that no instance compiles or captures a CUDA graph inside a measurement window. Yields
    the server, its provenance and the perf data narrowed to the served inputs."""
    perf_failures.check_fits(spec, sweep)  # before a server starts
    with served(spec, config_pbtxt, server_log,
                static_batching=scenario == "offline") as (server, prov):
        names = triton_config.served_inputs(config_pbtxt)
        data_json = _served_data(perf_data, names, work)
        # a batch inside the tensors (ensemble): its samples made into the request
        encode = artifacts.of(spec).request_encoder(spec, config_pbtxt) if sweep[0].shapes else None
        inputs = _warmup_inputs(perf_data if encode else data_json, spec)
        models_of = {}  # batch -> the models measured at it (the floor's: one a backend)
        for row in sweep:
            models_of.setdefault(row.batch, {})[row.model] = None
        batches = _warm_up_batches(spec, scenario, sweep)
        if prov["server"].get("kind") == "remote":  # its batches, within its max batch
            batches = _within_remote(sorted(models_of), prov["server"])
        for batch in batches:
            for model in models_of.get(batch, [sweep[-1].model]):
                warm_up(server.grpc_url, spec, [np.repeat(a, batch, axis=0) for a in inputs],
                        names, instances or spec["model"]["triton"]["instances"],
                        name=server.served_name(model), encode=encode, version=server.version)
        yield server, prov, data_json


def _within_remote(batches: list[int], server: dict) -> list[int]:
    """The batches a sweep sends, refused early where a remote model cannot take them."""
    top = server["max_batch_size"]
    over = [b for b in batches if top and b > top]
    if over:
        raise ValueError(f"remote model '{server['model']}' at {server['http_url']} takes "
                         f"batches up to {top}; the sweep sends {over}: lower the scenario's "
                         "batch sizes or serve a deployment with a larger max_batch_size")
    return batches


def _warm_up_batches(spec: dict, scenario: str, sweep: list) -> list[int]:
    """The measured batch sizes; online also every power of two from the request's batch
    up to the max batch size, the batches (and padded buckets) the dynamic batcher can
    form: a bucket's first call inside a window compiles or records a graph there (on an
    H100, torch-compile's first batch of 128 took 118 s and the level never stabilised)."""
    batches = {row.batch for row in sweep}
    if scenario == "online":  # up to the max batch of the deployment online sends to
        top = deployments.for_scenario(spec, scenario, min(batches)).max_batch_size
        batches |= {b for b in (2**i for i in range(top.bit_length() + 1))
                    if min(batches) < b < top} | {top}
    return sorted(batches)


def _served_data(data_json: Path, names: list[str], work: Path) -> Path:
    """The perf data narrowed to the inputs the served config takes (an onnxruntime
    config lists only the graph's inputs); the file itself when it takes them all."""
    data = json.loads(Path(data_json).read_text())
    if all(set(entry) <= set(names) for entry in data["data"]):
        return data_json
    narrowed = work / "perf_data.json"
    narrowed.write_text(json.dumps(
        {"data": [{k: v for k, v in entry.items() if k in names} for entry in data["data"]]}))
    return narrowed


def _warmup_inputs(data_json: Path, run: dict) -> list[np.ndarray]:
    """The first sample of the perf data, as batch-1 arrays (a zero-size placeholder for
    an input the served config does not take: the warm-up skips it)."""
    first = json.loads(Path(data_json).read_text())["data"][0]
    return [
        np.asarray(first[t["name"]]["content"], dtype=numpy_dtype(t["dtype"]))
        .reshape([1, *first[t["name"]]["shape"]])
        if t["name"] in first else np.zeros((1, 0))
        for t in run["model"]["inputs"]
    ]
