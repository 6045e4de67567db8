"""One level of a sweep, the loop's body written once for the closed loop (offline, online,
the floor, a search point) and the open loop (rate): perf_analyzer at the level, while the
serving processes, the GPU (deploybench.measurement.telemetry) and the host
(measurement.host_load) are sampled, every request's latency exported where the sweep takes
the tail; then the batches Triton's dynamic batcher formed meanwhile and what else reached
the server."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..measurement import provenance, telemetry
from ..measurement.host_load import HostLoad
from ..triton import perf_analyzer
from ..triton.client import executions_by_batch, formed_since
from ..triton.perf_analyzer import EXPORT_DROPPED
from ..triton.perf_command import Row
from ..triton.perf_failures import PerfDeath, PerfError
from ..triton.perf_output import FOREIGN

# the scenarios whose levels Triton's dynamic batcher serves: their formed batches counted
DYNAMIC = ("online", "rate")


@dataclass
class Level:
    runs: list[dict]  # perf_analyzer's results, one a repeat (none: `error` says why)
    telemetry: dict  # what the serving processes and the GPU did meanwhile
    host_load: dict  # with what else reached the server (interference)
    formed: dict[int, int] | None  # executions by batch size (online, rate)
    inside: object = None  # what `inside` found from the runs, within the sampling
    error: PerfError | None = None  # the open loop's: perf_analyzer gave no level


def measure(spec: dict, scenario: str, server, prov: dict, row: Row, data_json: Path,
            work: Path, log, *, repeats: int = 1, export: Path | None = None,
            timeout_s: float | None = None,
            inside: Callable[[list[dict]], object] | None = None) -> Level:
    """The level of `row`, measured `repeats` times; `inside(runs)` runs within the same
    sampling (the closed loop's tail, whose windows may be measured again longer). A level
    perf_analyzer finds no result for fails the sweep, except in the open loop (rate),
    which judges a level by every request's latency: one it gave none for, or whose export
    it dropped, is recorded with why (`error`), its formed batches not counted."""
    formed = scenario in DYNAMIC
    before = executions_by_batch(server, row.model) if formed else {}
    gpus = provenance.measured_devices(prov)
    runs, found, error = [], None, None
    with (telemetry.Telemetry(gpus, server_pids=server.pids) as sampled,
          HostLoad(gpus) as load):
        try:
            runs = [perf_analyzer.measure(spec, scenario, server, row, data_json, work, log,
                                          export=export, timeout_s=timeout_s)
                    for _ in range(repeats)]
        except PerfDeath:
            raise  # perf_analyzer or the stub killed: no level's answer
        except PerfError as err:  # beyond what the server can answer: not done in time,
            if scenario != "rate":  # or its connections refused (an H100's TFT at 6,000/s)
                raise
            error = err
        else:
            if scenario == "rate" and EXPORT_DROPPED in runs[-1]:
                error, runs = PerfError(runs[-1][EXPORT_DROPPED]), []
            elif inside:
                found = inside(runs)
    # the host load's result exists once its block has ended
    counted = formed_since(server, row.model, before) if formed and not error else None
    return Level(runs, sampled.result, interference(server, runs, load.result), counted,
                 found, error)


def interference(server, runs: list[dict], load: dict) -> dict:
    """A level's host load (deploybench.measurement.host_load) with what reached its server
    besides the measurement: requests perf_analyzer did not send, changes to the server's
    log or trace settings. Either flags the level as contention does. (A server in a
    network namespace of its own, deploybench.measurement.isolation, can be reached by no
    one else.)"""
    counted = [r[FOREIGN] for r in runs if r.get(FOREIGN) is not None]
    changed = server.settings_changed()
    foreign = max(counted) if counted else None
    return {**load, "foreign_requests": foreign,
            **({"server_settings_changed": changed} if changed else {}),
            "contended": bool(load.get("contended") or foreign or changed)}
