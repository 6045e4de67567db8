"""Facts of a resolved run (resolve.Settings.run) that rules, steps and reports ask alike:
which of its steps run on its device, whether it is measured online, in which
shared-memory modes, how it warms up, how perf_analyzer windows and reaches the server."""

from __future__ import annotations

import math

from ..backends import BACKENDS, is_ensemble
from ..records.tail import KEPT_WINDOWS

# The warm-up's levels where a scenario names none: its largest batch at its highest
# concurrency. "max" and "max/2" stand for the sweep's (as the reference runners chose).
DEFAULT_WARMUP_LEVELS = (("max", "max"),)
# A warm-up level's windows, recorded as its scenario's `warmup_trials`: perf_analyzer run
# with any spread accepted ends after the three it compares, a clean exit. The runners'
# perf_client went on to 10 until stable (FastPitch's 60-s windows: up to 40 minutes of one
# offline step on an H100, 2026-11-28); one cut short by -r 3 left a request in flight into
# the next level once (a CI run of 2026-11-28).
WARM_UP_WINDOWS = 3


# Steps that run on the keyed device (and check it is there); the others run anywhere.
DEVICE_STEPS = ("conversion_check", "native", "accuracy", "offline", "online", "floor")


def may_run_on_device(step: str) -> bool:
    """Whether `step` runs on the keyed device for some run (see runs_on_device)."""
    return step in DEVICE_STEPS or step == "convert"


def runs_on_device(run: dict, step: str) -> bool:
    """Whether `step` of a run needs the run's device: the steps above, and a conversion
    that builds a TensorRT engine or casts to FP16 (on the device)."""
    if step == "convert":
        from ..runners import RUNNERS  # numpy: not imported before a step isolates itself

        runner = (BACKENDS[run["backend"]["dense"]].runner  # an ensemble converts its dense part
                  if is_ensemble(run) else run["backend"]["runner"])
        return RUNNERS[runner].builds_on_device or run["precision"] != "fp32"
    return step in DEVICE_STEPS


def online_refusal(run: dict) -> str | None:
    """Why a configuration has no online scenario, None where it has one. An ensemble
    (hps-*) takes one request per batch, the batch inside its tensors (max_batch_size 0,
    reference 003's interface): Triton's dynamic batcher cannot form batches of it, and the
    reference publishes offline tables only."""
    if not is_ensemble(run):
        return None
    key = run["key"]
    return (f"no online scenario for backend '{key['backend']}' ({run['backend']['title']}) "
            f"of model '{key['model']}': the ensemble takes one request per batch (the batch "
            "inside its tensors EMB_KEY, EMB_N_KEY, as reference 003 serves it; max_batch_size 0), "
            "so dynamic batching cannot apply; the reference publishes offline tables only")


def serves_online(run: dict) -> bool:
    """Whether a configuration is measured online (its online.csv, plot, report section):
    the one test the rules, reports and comparisons ask."""
    return online_refusal(run) is None


def shared_memory_modes(offline: dict) -> list[str]:
    """The offline scenario's shared-memory modes, in the order they are measured."""
    modes = offline.get("shared_memory", "system")
    return [modes] if isinstance(modes, str) else list(modes)


def scenario_modes(settings: dict, scenario: str) -> list[str]:
    """A scenario's shared-memory modes: offline its settings', online none (its requests
    carry their tensors, as the references' online runners sent them)."""
    return shared_memory_modes(settings) if scenario == "offline" else ["none"]


def window(run: dict, scenario: str) -> tuple[str, int, int]:
    """The scenario's measurement mode, interval (ms) and request count: the model's
    scenario settings over the run's perf settings. Online, whose every request's tail is
    read, counts at least perf.min_requests over the three windows perf_analyzer keeps."""
    settings, perf = run["model"][scenario], run["perf"]
    count = settings["measurement_request_count"]
    if scenario == "online":
        count = max(count, math.ceil(perf.get("min_requests", 0) / KEPT_WINDOWS))
    return (settings.get("measurement_mode", perf["measurement_mode"]),
            settings.get("measurement_interval_ms", perf["measurement_interval_ms"]), count)


def protocol(run: dict, scenario: str) -> str:
    """gRPC offline and HTTP online unless the model's scenario says otherwise."""
    return run["model"][scenario].get("protocol", "grpc" if scenario == "offline" else "http")
