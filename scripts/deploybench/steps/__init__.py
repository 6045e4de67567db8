"""The pipeline's steps, one module per stage, each step a function named as its rule.

Every rule runs `scripts/run_step.py` (Snakemake's `script:`), which calls `run`: the
rule's step gets the rule's named inputs, outputs, logs and params as keyword arguments
(paths as `Path`), `params.spec` (the resolved settings the step depends on, from
`step_specs.step_spec`) as its first argument, and its stdout and stderr go to `log.log`.
No shell is involved: a path with spaces or `$(...)` in the config stays a path.
A step on the device first claims it (`measurement.device.claim`): the GPU key checked
once, a free GPU of the key taken by its lock and made the only one the step sees.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import signal
import sys
import traceback
from contextlib import contextmanager, nullcontext
from pathlib import Path

from ..measurement import device, isolation, progress

# rule -> module:function. A rule that differs from another only by a folder output
# (Snakemake's directory()) runs the same step.
STEPS = {
    "weights": "source:weights",
    "generate_data": "source:generate_data",
    "eval_set": "source:eval_set",
    "perf_data": "source:perf_data",
    "export": "export:export",
    "export_savedmodel": "export:export",
    "export_dense_savedmodel": "export:export",
    "export_repository": "export:export",
    "sparse_export": "export:sparse_export",
    "convert": "convert:convert",
    "convert_savedmodel": "convert:convert",
    "convert_ensemble": "convert:convert",
    "conversion_check": "conversion_check:conversion_check",
    "model_repository": "model_repository:model_repository",
    "accuracy": "accuracy:accuracy",
    "offline": "performance:offline",
    "online": "performance:online",
    "rate": "performance:rate",
    "floor": "performance:floor",
    "native": "native:native",
    "search_repository": "model_repository:model_repository",
    "search_point": "search:search_point",
    "search_report": "search:search_report",
    "plots": "report:plots",
    "online_plot": "report:online_plot",
    "rate_plot": "report:rate_plot",
    "configuration_report": "report:configuration_report",
    "model_report": "report:model_report",
    "configuration_comparison": "report:configuration_comparison",
    "model_comparison": "report:model_comparison",
    "configuration_html": "report:html_page",
    "model_html": "report:html_page",
    "configuration_comparison_html": "report:html_page",
    "model_comparison_html": "report:html_page",
    "ship": "report:ship",
    "ship_html": "report:html_page",
}


# Named inputs a rule has only to re-run or order its step, which the step does not take
# (besides every rule's `log`, which run() takes, and `code`, the plug-in's source digest)
TRIGGERS = {
    "weights": {"checkpoint"},  # the checkpoint's content stamp (input_digest)
    "eval_set": {"data_digest"},
    "sparse_export": {"data_digest"},
    # empty: refused while planning where the configuration has no such step
    "accuracy": {"refused"},
    "floor": {"refused"},
    "native": {"refused"},
}

# The steps that start a server of their own where server.kind is not remote
SERVING = {"accuracy", "offline", "online", "rate", "floor", "search_point"}


def _isolated(rule: str, spec: dict) -> bool:
    """Whether the step's server, stubs and perf_analyzer run in namespaces of their own
    (deploybench.measurement.isolation): a server this process starts (not a remote one, nor one a
    docker daemon starts, whose ports are the host's)."""
    server = spec.get("server", {})
    return rule in SERVING and server.get("kind") != "remote" and not (
        server.get("kind") == "container" and server.get("engine") == "docker")


def _gpus(rule: str, spec: dict) -> int:
    """The GPUs a step's deployment spans (triton.gpus): a served step holds them all; the
    in-process ones measure on one."""
    return device.deployment_gpus(spec) if rule in SERVING else 1


def step_function(rule: str):
    if rule not in STEPS:
        raise KeyError(f"no step for rule '{rule}'; steps: {', '.join(sorted(STEPS))}")
    module, function = STEPS[rule].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def _as_paths(value):
    return [Path(v) for v in value] if isinstance(value, list) else Path(value)


@contextmanager
def _output_to(log: Path):
    """stdout and stderr of this process (Python's and any library's) into `log`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "w") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        progress.terminal_fd = saved[1]  # a long step's progress lines reach the terminal
        try:
            yield
        finally:
            progress.terminal_fd = None
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


class Unwired(TypeError):
    """A rule that names what its step does not take: the pipeline's fault, raised as it is."""


def _step_call(rule: str, named: dict):
    """The rule's step function and the keyword arguments of `named` it takes."""
    step = step_function(rule)
    wanted = inspect.signature(step).parameters
    unknown = set(named) - set(wanted) - TRIGGERS.get(rule, set()) - {"log", "code"}
    if unknown:  # a renamed parameter with a default would run without its file
        raise Unwired(f"rule {rule}: {', '.join(sorted(unknown))} named in the rule "
                        f"but not taken by its step {STEPS[rule]} (takes "
                        f"{', '.join(wanted)}); rename one, or list a trigger-only input "
                        "in deploybench.steps.TRIGGERS")
    return step, {name: value for name, value in named.items() if name in wanted}


def _terminated(signum, frame):
    # Snakemake stops a job with SIGTERM: unwind, so that a server the step started is
    # stopped and its shared memory removed (Python's default would end at once).
    raise SystemExit(128 + signum)


def run(smk) -> None:
    """Run the step of the Snakemake job `smk` (the `snakemake` object of a script)."""
    signal.signal(signal.SIGTERM, _terminated)
    spec = json.loads(smk.params.spec)
    named = {name: _as_paths(value)
             for group in (smk.input, smk.output, smk.log) for name, value in group.items()}
    named |= {name: value for name, value in smk.params.items() if name != "spec"}
    log = Path(smk.log.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    failure = None
    with _output_to(log):
        try:
            with device.claim(spec, hold=smk.rule not in device.UNHELD,
                              count=_gpus(smk.rule, spec)) \
                    if device.claims(spec, smk.rule) else nullcontext():
                # The lock is taken first (its files checked as the host's users own them,
                # which a user namespace would hide), then the namespaces, before any thread
                # starts: numpy's start some, and a user namespace takes one thread alone.
                if _isolated(smk.rule, spec):
                    isolation.isolate()
                step, kwargs = _step_call(smk.rule, named)
                step(spec, **kwargs)
        except Unwired:
            raise
        except Exception as err:  # the traceback for the log, one clear line for both
            traceback.print_exc()
            failure = f"deploybench {smk.rule}: error: {err}"
            print(failure, file=sys.stderr)
    if failure:
        print(f"{failure}\n(log: {log})", file=sys.stderr)
        sys.exit(1)
