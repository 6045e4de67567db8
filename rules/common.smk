import json
import re
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from deploybench.cluster import RESOURCES, job_resources
from deploybench.config import Settings, step_spec
from deploybench.formats import BACKENDS, EXPORT_ARTIFACTS
from deploybench.plugins import sources as plugin_sources

SETTINGS = Settings(config, root=Path(workflow.basedir))
# The models Triton's python backend runs (copied into every model repository): a change
# to them re-runs the repositories and what was measured on them.
SERVED_CODE = sorted(
    str(p) for p in (Path(workflow.basedir) / "scripts/deploybench").glob("triton_*model.py")
)

# Loose patterns: a key that matches them but is not configured is refused by the input
# functions below with the list of valid keys, instead of "no rule to produce ...".
wildcard_constraints:
    model=r"[a-z0-9][a-z0-9-]*",
    gpu=r"[a-z0-9][a-z0-9-]*",
    backend=r"[a-z0-9][a-z0-9-]*",
    precision=r"[a-z0-9]+",
    export_format=r"onnx|ts-trace|ts-script|dense-onnx",
    exported=r"model\.(pt|onnx)",
    converted=r"model\.(pt|onnx|plan)",


def measuring_threads():
    """A measuring job's threads: every local core, so that no export or conversion runs
    beside it and skews its numbers; 1 where an executor places jobs (a cluster job is
    sized by cpus_per_task, deploybench.cluster) or no core count is set."""
    if not workflow.local_exec:
        return 1
    try:
        return workflow.cores
    except WorkflowError:  # no --cores given (e.g. a remote job's own run)
        return 1


def src(name):
    """Output pattern of a per-model source artifact."""
    return f"results/{{model}}/source/{name}"


def cfg(name):
    """Output pattern of a per-configuration artifact."""
    return f"results/{{model}}/{{gpu}}/{{backend}}_{{precision}}/{name}"


def run_of(w):
    return SETTINGS.run(w.model, w.gpu, w.backend, w.precision)


def spec(step):
    """params: function giving the JSON settings a step depends on."""
    return lambda w: json.dumps(step_spec(run_of(w), step), sort_keys=True)


@lru_cache(maxsize=None)
def _job_resources(step, wildcards):
    w = dict(wildcards)
    run = SETTINGS.run(w["model"], w["gpu"], w["backend"], w["precision"]) if "gpu" in w else None
    return job_resources(config["cluster"], SETTINGS.gpus, step, run)


def cluster_resources(step):
    """resources: of a rule's jobs on a cluster (deploybench.cluster): GPU, partition,
    memory, runtime from the GPU registry and the config's `cluster` section."""
    return {
        name: (lambda wildcards, name=name: _job_resources(step, tuple(wildcards.items()))[name])
        for name in RESOURCES
    }


def export_spec(w):
    return json.dumps(SETTINGS.export_settings(w.model), sort_keys=True)


def split_export_spec(w):
    return json.dumps(SETTINGS.split_export_settings(w.model), sort_keys=True)


def any_export_spec(w, output):
    """The export's settings; a dense part's export also reads the ensemble's tensors."""
    dense = Path(output[0]).parent.name.startswith("dense-")
    return split_export_spec(w) if dense else export_spec(w)


def run_path(w, name):
    return f"results/{w.model}/{w.gpu}/{w.backend}_{w.precision}/{name}"


def data_dir(w):
    """The user's dataset when configured, else the generated one."""
    path = SETTINGS.export_settings(w.model)["data"]["path"]
    return path if path else f"results/{w.model}/source/data"


def exported_path(w):
    fmt = BACKENDS[run_of(w)["backend"]["key"]].export
    return f"results/{w.model}/export/{fmt}/{EXPORT_ARTIFACTS[fmt]}"


def sparse_export(w):
    """The sparse part of a recommender (tables and their frequency ranking), exported
    once per model for its ensemble configurations (hps-* backends)."""
    return f"results/{w.model}/export/sparse"


def converted_path(w):
    return run_path(w, f"converted/{run_of(w)['artifact']}")


def config_pbtxt(w):
    return run_path(w, f"model_repository/{w.model}/config.pbtxt")


def configuration_readme(key):
    return "results/{model}/{gpu}/{backend}_{precision}/README.md".format(**key)


def default_targets():
    readmes = [configuration_readme(t) for t in config["targets"]]
    models = sorted({t["model"] for t in config["targets"]})
    return readmes + [f"results/{m}/README.md" for m in models]


def model_report_inputs(w):
    """The model's configurations among the default targets and among the targets asked
    for on the command line (so a report built in the same run waits for them). The
    report also gathers, when it runs, every other configuration report already on disk
    (e.g. committed GPU results), without making them inputs this machine would rebuild."""
    defaults = [configuration_readme(t) for t in config["targets"] if t["model"] == w.model]
    pattern = re.compile(rf"results/{re.escape(w.model)}/[^/]+/[^/]+/README\.md$")
    requested = {m.group(0) for t in workflow.dag_settings.targets
                 if (m := pattern.search(Path(t).as_posix()))}
    return sorted(set(defaults) | requested)
