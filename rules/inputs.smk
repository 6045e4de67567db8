# The rules' input functions: a configuration's files that a step reads, where it has them
# (an empty list where it has not: the step's argument), or its refusal while the DAG is
# built; the user's checkpoint and dataset by the stamp of their content.
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from deploybench.records import baseline
from deploybench.settings import input_digest
from deploybench.backends import EXPORT_ARTIFACTS, export_precision, is_ensemble, served_as_is
from deploybench.settings.run_facts import online_refusal, serves_online
from deploybench.settings.scenarios import (
    rate_refusal,
    serves_rate,
    step_refusal,
)


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


def comparison_baseline(w):
    """A folder baseline's files for this configuration (none for `previous` or a history
    stamp, whose copies are never rewritten): replacing them re-runs its compare.md."""
    folder = Path(layout.fill(cfg(), **key_of(w)))
    return baseline.folder_files(folder, config["compare"]["baseline"])
