# Shared by the rules: the resolved settings, the wildcards' patterns and a job's own
# settings (params: what it depends on; threads, resources, priority: what it asks for).
# The input functions are in rules/inputs.smk, the run's targets and what the HTML report
# shows in rules/targets.smk, the search's in rules/search_common.smk.
import json
from functools import lru_cache
from pathlib import Path

from deploybench.records import layout
from deploybench import search as configuration_search
from deploybench.settings.cluster import DEVICE_GROUP, RESOURCES, job_resources
from deploybench.settings.invocation import invocation
from deploybench.settings.resolve import Settings
from deploybench.settings.step_specs import step_spec
from deploybench.settings.run_facts import DEVICE_STEPS, may_run_on_device
from deploybench.records.files import digest
from deploybench.plugins import sources as plugin_sources
from deploybench.served import bundled_code
from deploybench.triton import cpp_backend

SETTINGS = Settings(config, root=Path(workflow.basedir))
# A config error fails the run here, also when every result already exists.
SETTINGS.check_all(config["targets"])
configuration_search.check_all(SETTINGS)


# Loose patterns: a key that matches them but is not configured is refused by the input
# functions (rules/inputs.smk) with the list of valid keys, instead of "no rule to produce
# ...".
wildcard_constraints:
    model=r"[a-z0-9][a-z0-9-]*",
    gpu=r"[a-z0-9][a-z0-9-]*",
    backend=r"[a-z0-9][a-z0-9-]*",
    precision=r"[a-z0-9][a-z0-9-]*",
    export_folder=layout.export_folders(
        ("onnx", "ts-trace", "ts-script", "torch-export", "dense-onnx")
    ),
    exported=r"model\.(pt|pt2|onnx)",
    point=configuration_search.POINT,
    converted=r"model\.(pt|pt2|onnx|plan)",


def measuring_threads(wildcards):
    """A measuring job's threads: locally every core (a GPU key's job: its share of them,
    one share a bench_slot), so that no export or conversion runs beside it and skews its
    numbers; where an executor places jobs, the device steps' cpus_per_task
    (deploybench.settings.cluster), which the Kubernetes plugin sizes a pod's CPU from; 1 in
    a job's own run without a core count. Per job: the executor is known only then."""
    run = invocation(workflow)
    if not run.local:
        return config["cluster"]["resources"]["device"]["cpus_per_task"]
    if run.cores is None:  # no --cores given
        return 1
    # a GPU key's job shares the cores with the others side by side, one a bench_slot
    if SETTINGS.gpus[wildcards.gpu]["kind"] == "cpu" or run.bench_slots < 2:
        return run.cores
    return max(1, run.cores // run.bench_slots)


src = layout.source  # a per-model source artifact's pattern
cfg = layout.configuration  # a per-configuration artifact's pattern


def key_of(w):
    return {"model": w.model, "gpu": w.gpu, "backend": w.backend, "precision": w.precision}


def run_of(w):
    """The resolved settings of a configuration (refuses an unknown or impossible key
    with the valid ones)."""
    return SETTINGS.run(w.model, w.gpu, w.backend, w.precision)


@lru_cache(maxsize=None)
def _spec(model, gpu, backend, precision, step):
    run = SETTINGS.run(model, gpu, backend, precision)
    return json.dumps(step_spec(run, step), sort_keys=True)


def spec(step):
    """params: function giving the JSON settings a step depends on (a change to them
    re-runs the job)."""
    return lambda w: _spec(w.model, w.gpu, w.backend, w.precision, step)


@lru_cache(maxsize=None)
def _job_resources(step, wildcards):
    w = dict(wildcards)
    run = SETTINGS.run(w["model"], w["gpu"], w["backend"], w["precision"]) if "gpu" in w else None
    return job_resources(config["cluster"], SETTINGS.gpus, step, run)


def cluster_resources(step):
    """resources: of a rule's jobs on a cluster (deploybench.settings.cluster): GPU, partition,
    memory, runtime from the GPU registry and the config's `cluster` section. As values
    where they cannot differ between jobs (planning evaluates a function per job): all of
    them for a step never on the device, the sizes for one always on it."""
    if not may_run_on_device(step):
        fixed = job_resources(config["cluster"], SETTINGS.gpus, step)
        return {name: value for name, value in fixed.items() if value is not None}
    always = step in DEVICE_STEPS
    fixed = config["cluster"]["resources"]["device"] if always else {}
    per_job = [name for name in RESOURCES if name not in fixed]
    return {
        **fixed,
        **{
            name: (
                lambda wildcards, name=name: _job_resources(step, tuple(wildcards.items()))[name]
            )
            for name in per_job
        },
    }


@lru_cache(maxsize=None)
def _export_spec(model, dense, formats=False):
    """The source's settings; a dense part's export also reads the ensemble's tensors, the
    export step the formats' own settings (`export`: the ONNX opset; its precision is the
    export folder's, so that setting it re-runs only the exports it names)."""
    settings = SETTINGS.split_export_settings if dense else SETTINGS.export_settings
    spec = settings(model)
    if formats:
        export = SETTINGS.models[model].get("export", {})
        spec["export"] = {k: v for k, v in export.items() if k != "precision"}
    return json.dumps(spec, sort_keys=True)


def export_spec(w):
    return _export_spec(w.model, False)


def split_export_spec(w):
    return _export_spec(w.model, True)


def any_export_spec(w, output):
    return _export_spec(w.model, Path(output[0]).parent.name.startswith("dense-"), True)


@lru_cache(maxsize=None)
def _plugin_code(model):
    return digest(plugin_sources(SETTINGS.export_settings(model)["plugin"]))


def plugin_code(w):
    """The plug-in's code (a digest of its files): a change re-runs the model from its
    weights."""
    return _plugin_code(w.model)


# The code that serves a model repository (a digest): what it bundles for Triton's python
# backend and the sources of the pipeline's C++ backend. A change re-runs the
# repositories and what was measured on them.
SERVED_CODE = digest([*bundled_code(), *cpp_backend.source_files()])


def run_order(w):
    """A job's priority: the earlier its configuration among config `targets`, the higher
    (a model's own jobs: its first configuration's), so that the scheduler finishes one
    configuration, report and all, before the next, and a run stopped at any point leaves
    every configuration it finished complete. 0 for one not among them."""
    given = dict(w.items())
    keys = [k for k in ("model", "gpu", "backend", "precision") if k in given]
    targets = config["targets"]
    for i, target in enumerate(targets):
        if all(target[k] == given[k] for k in keys):
            return len(targets) - i
    return 0
