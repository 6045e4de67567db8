import json
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from deploybench.records import baseline, built, layout
from deploybench.settings import input_digest
from deploybench import search as configuration_search
from deploybench.backends import EXPORT_ARTIFACTS, export_precision, is_ensemble, served_as_is
from deploybench.settings.cluster import DEVICE_GROUP, RESOURCES, job_resources
from deploybench.settings.invocation import invocation
from deploybench.settings.resolve import Settings
from deploybench.settings.step_specs import step_spec
from deploybench.settings.run_facts import online_refusal, serves_online
from deploybench.settings.scenarios import (
    rate_refusal,
    serves_rate,
    step_refusal,
)
from deploybench.settings.run_facts import DEVICE_STEPS, may_run_on_device
from deploybench.records.files import digest
from deploybench.plugins import sources as plugin_sources
from deploybench.reporting.ship import budget_of
from deploybench.served import bundled_code
from deploybench.triton import cpp_backend

SETTINGS = Settings(config, root=Path(workflow.basedir))
# A config error fails the run here, also when every result already exists.
SETTINGS.check_all(config["targets"])
configuration_search.check_all(SETTINGS)


# Loose patterns: a key that matches them but is not configured is refused by the input
# functions below with the list of valid keys, instead of "no rule to produce ...".
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
    numbers; where an executor places jobs, the device steps'
    cpus_per_task (deploybench.settings.cluster), which the Kubernetes plugin sizes a pod's CPU from;
    1 in a job's own run without a core count. Per job: the executor is known only then."""
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


def data_dir(w):
    """The user's dataset when configured, else the generated one."""
    return SETTINGS.dataset(w.model)


# The user's checkpoint and dataset as inputs of the rules that read them: a stamp of their
# content each (deploybench.settings.input_digest), rewritten while the DAG is built only when the
# content changed, so that a replaced file re-runs what read it whatever its mtime (tar x,
# cp -p, rsync -a set it back), and a touch re-runs nothing.
USER_INPUTS = {"checkpoint": ("weights", "checkpoint"), "data": ("data", "path")}


@lru_cache(maxsize=None)
def _input_stamp(model, name):
    section, key = USER_INPUTS[name]
    path = SETTINGS.export_settings(model)[section][key]
    if not path:
        return None
    stamp_file = layout.fill(src(f"{layout.INPUT_STAMPS}/{name}.sha256"), model=model)
    try:
        return str(input_digest.stamp(path, stamp_file, f"model '{model}': {section}.{key}"))
    except (input_digest.InputError, OSError) as err:
        raise WorkflowError(str(err)) from err


def data_digest(w):
    """The stamp of the user's dataset (none for a generated one: a rule's output)."""
    return _input_stamp(w.model, "data") or []


def checkpoint_digest(w):
    """The stamp of the user's checkpoint (none for a seeded initialisation)."""
    return _input_stamp(w.model, "checkpoint") or []


def data_input(w):
    """The dataset a step reads: the generated one (a rule's output), or the user's, whose
    own mtime is ignored (ancient): its stamp (data_digest) says when it changed."""
    path = SETTINGS.export_settings(w.model)["data"]["path"]
    return ancient(path) if path else layout.fill(src("data"), model=w.model)


def exported_path(w):
    """The export a configuration converts: its format in its export precision."""
    run = run_of(w)
    fmt = run["backend"]["export"]
    path = layout.export(fmt, EXPORT_ARTIFACTS[fmt], export_precision(run))
    return layout.fill(path, model=w.model)


def sparse_export(w):
    """The sparse part of a recommender (tables and their frequency ranking), exported
    once per model for its ensemble configurations (hps-* backends)."""
    return layout.fill(layout.sparse(), model=w.model)


def if_online(name):
    """input: a configuration's online file `name` (online.csv, its plot ...) where the
    configuration is measured online (run_facts.serves_online), none (an empty list: the
    step's argument) where it is not."""

    def inputs(w):
        return layout.fill(cfg(name), **key_of(w)) if serves_online(run_of(w)) else []

    return inputs


def if_built(step, name):
    """input: a configuration's file `name` of `step` (accuracy, native, floor) where the
    configuration has that step, none (an empty list: the step's argument) where it has not
    (scenarios.step_refusal: a remote server, a repository served as it is, no source
    model)."""

    def inputs(w):
        return [] if step_refusal(run_of(w), step) else layout.fill(cfg(name), **key_of(w))

    return inputs


def refused_without(step):
    """input (none) of `step` (accuracy, native, floor): a configuration without it
    (scenarios.step_refusal) is refused with the reason while the DAG is built."""

    def inputs(w):
        refused = step_refusal(run_of(w), step)
        if refused:
            raise WorkflowError(refused)
        return []

    return inputs


def if_rate(name):
    """input: a configuration's rate file `name` where its model config has a rate
    scenario there (scenarios.serves_rate), none where it has not."""

    def inputs(w):
        return layout.fill(cfg(name), **key_of(w)) if serves_rate(run_of(w)) else []

    return inputs


def rate_measured(name, of_peak=False, step=None):
    """input of the rate rule: `name`, a configuration file it reads (of_peak: only where
    the rates are fractions of the online peak, rate.rates_of_peak; `step`'s file only
    where the configuration has that step); a configuration without a rate scenario is
    refused with the reason while the DAG is built."""

    def inputs(w):
        run = run_of(w)
        refused = rate_refusal(run)
        if refused:
            raise WorkflowError(refused)
        if of_peak and "rates_of_peak" not in run["model"]["rate"]:
            return []
        if step and step_refusal(run, step):
            return []
        return layout.fill(cfg(name), **key_of(w))

    return inputs


def ensemble_data(w):
    """The dataset an ensemble's offline step draws its requests and cache warm-up from
    (ensemble.perf_samples, warmup_samples); none for a single model, whose perf data
    is its samples."""
    return data_input(w) if is_ensemble(run_of(w)) else []


def online_measured(name, step=None):
    """input of the online rule: `name`, a configuration file it reads (`step`'s only where
    the configuration has that step); a configuration without an online scenario is
    refused with the reason while the DAG is built."""

    def inputs(w):
        run = run_of(w)
        refused = online_refusal(run)
        if refused:
            raise WorkflowError(refused)
        if step and step_refusal(run, step):
            return []
        return layout.fill(cfg(name), **key_of(w))

    return inputs


def converted_path(w):
    return layout.fill(cfg(f"converted/{run_of(w)['artifact']}"), **key_of(w))


def served_path(w):
    """What a configuration's repository serves: its converted model, or a user's Triton
    model folder as it is (its export: no conversion)."""
    return exported_path(w) if served_as_is(run_of(w)) else converted_path(w)


def conversion_checked(w):
    """The conversion check a repository waits for; none where nothing is converted."""
    run = run_of(w)
    return [] if served_as_is(run) else layout.fill(cfg("conversion_check.csv"), **key_of(w))


def configuration_readme(key):
    return layout.fill(cfg(layout.CONFIGURATION_REPORT), **key)


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


def default_targets():
    """Every default configuration's report and regression report and its model's, as HTML
    pages (the markdown reports they render come with them): the HTML report (`snakemake
    --report`) shows what its targets' jobs made."""
    pages = [
        layout.fill(cfg(page), **t)
        for t in config["targets"]
        for page in (layout.CONFIGURATION_PAGE, layout.COMPARISON_PAGE)
    ]
    models = sorted({t["model"] for t in config["targets"]})
    ships = sorted({(t["model"], t["gpu"]) for t in config["targets"]})
    return built_only(
        pages
        + [
            layout.fill(page, model=m)
            for m in models
            for page in (layout.MODEL_PAGE, layout.MODEL_COMPARISON_PAGE)
        ]
        + [layout.fill(layout.SHIP_PAGE, model=m, gpu=g) for m, g in ships if budget(m, g)]
    )


def budget(model, gpu):
    """The p99 budget what to ship ranks by on that key (reporting.ship.budget_of)."""
    return budget_of(SETTINGS.model_settings(model, gpu))


def ship_inputs(w):
    """The default targets' configuration reports on the model's GPU key (while reporting:
    those built, as the model reports' inputs)."""
    return built_only(
        [
            layout.fill(cfg(layout.CONFIGURATION_REPORT), **t)
            for t in config["targets"]
            if (t["model"], t["gpu"]) == (w.model, w.gpu)
        ]
    )


def ship_spec(w):
    title = SETTINGS.models[w.model]["title"]
    return json.dumps({"title": title, "gpu": w.gpu, "budget_ms": budget(w.model, w.gpu)})


# `snakemake --report` of a partly built workflow: Snakemake refuses a DAG that holds a file
# marked for the report which does not exist, so while it reports (and does not run first),
# the default targets and the model reports' inputs are the ones already built.
REPORTING = invocation(workflow).reporting


def built_only(paths):
    return [p for p in paths if Path(p).exists()] if REPORTING else paths


def run_summary(failed=False):
    """The lines a run ends with (deploybench.records.built): the reports of its targets (the
    default target's, `references`', or the files named), and the HTML report's command with
    the run's configuration files and targets."""
    run = invocation(workflow)
    named = list(run.targets)
    targets = [t for t in named if t not in run.rules]
    if not named or "all" in named:
        targets += default_targets()
    if "references" in named:
        targets += reference_targets()
    args = [a for f in run.configfiles for a in ("--configfile", str(f))]
    return built.summary(targets, Path.cwd(), args + named, failed)


def reference_targets():
    """The configuration reports that reproduce every published table of the reference
    documents, on each GPU key it was measured on (models' reference.pairs)."""
    keys = ("model", "gpu", "backend", "precision")
    return [configuration_readme(dict(zip(keys, t))) for t in SETTINGS.reference_targets()]


def _model_inputs(w, name):
    """A per-configuration file (`name`) of the model's configurations among the default
    targets and among the targets asked for on the command line."""
    defaults = [layout.fill(cfg(name), **t) for t in config["targets"] if t["model"] == w.model]
    pattern = layout.as_regex(cfg(name), model=w.model)
    requested = {
        m.group(0)
        for t in invocation(workflow).targets
        if (m := pattern.search(Path(t).as_posix()))
    }
    return built_only(sorted(set(defaults) | requested))


def model_report_inputs(w):
    """The model's configurations among the default targets and among the targets asked
    for on the command line (so a report built in the same run waits for them). The
    report also gathers, when it runs, every other configuration report already on disk
    (e.g. committed GPU results), without making them inputs this machine would rebuild."""
    return _model_inputs(w, layout.CONFIGURATION_REPORT)


def model_comparison_inputs(w):
    """The regression reports of the configurations the model report takes (the model's
    comparison gathers the others on disk as the model report does)."""
    return _model_inputs(w, layout.COMPARISON)


def comparison_baseline(w):
    """A folder baseline's files for this configuration (none for `previous` or a history
    stamp, whose copies are never rewritten): replacing them re-runs its compare.md."""
    folder = Path(layout.fill(cfg(), **key_of(w)))
    return baseline.folder_files(folder, config["compare"]["baseline"])


# What the HTML report (`snakemake --report report.html`) shows, and where: reported()
# files an output under its model (category), then its configuration
# `<gpu>/<backend>_<precision>` or "all configurations" (subcategory), lists it by one
# label, "<kind>: <file name>" (Snakemake makes a second label with two values a toggle
# that hides half the list), and describes it by report/<configuration|model>/<file>.rst.
REPORT_KINDS = {".csv": "table", ".png": "plot", ".html": "report"}
MODEL_FILES = "all configurations"


def reported(pattern):
    """`pattern`, an output of a configuration (cfg(...)), of a model on a GPU key or of a
    model (under layout.MODEL) that a reader looks at, marked for the HTML report."""
    for level, folder, subcategory in (
        ("configuration", cfg(), "{gpu}/{backend}_{precision}"),
        ("gpu", f"{layout.MODEL}/{{gpu}}", "{gpu}: what to ship"),
        ("model", layout.MODEL, MODEL_FILES),
    ):
        if pattern.startswith(f"{folder}/"):
            name = Path(pattern[len(folder) + 1 :])
            break
    else:
        raise ValueError(f"reported(): {pattern} is not a configuration's or a model's file")
    caption = Path(workflow.basedir, "report", level, name.with_suffix(".rst"))
    if not caption.is_file():
        raise ValueError(f"reported(): {pattern} has no caption ({caption})")
    kind = REPORT_KINDS[name.suffix]
    return report(
        pattern,
        caption=str(caption),
        category="{model}",
        subcategory=subcategory,
        labels={"result": f"{kind}: {name.stem.replace('_', ' ')}"},
    )
