"""What each per-configuration step depends on: the part of a resolved run (`resolve.Settings.run`)
that Snakemake passes a step as `params.spec`, so that a change to anything else re-runs
nothing."""

from __future__ import annotations

from ..backends import is_ensemble

# What each per-configuration step reads: a change to anything else does not re-run it.
_COMMON = ("key", "gpu", "backend", "precision", "artifact", "allow_gpu_mismatch",
           "export_precision")  # where a run has it (backends.export_precision)
_SERVE = (*_COMMON, "server")
STEP_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # step: (run fields, model fields)
    "convert": (_COMMON, ("inputs", "outputs", "triton", "ensemble")),
    "conversion_check": (_COMMON, ("inputs", "outputs", "conversion", "triton", "ensemble",
                                    "compile_mode")),
    "native": ((*_COMMON, "native"), ("inputs", "outputs", "triton", "offline", "ensemble",
                                      "compile_mode")),
    # the server's backends decide who serves it
    "model_repository": (_SERVE, ("inputs", "outputs", "triton", "ensemble", "compile_mode")),
    "floor": ((*_SERVE, "perf"), ("inputs", "outputs", "triton", "offline")),
    # triton: which deployment it sends to (deploybench.settings.deployments)
    "accuracy": (_SERVE, ("plugin", "hparams", "inputs", "outputs", "accuracy", "data",
                          "triton")),
    "offline": ((*_SERVE, "perf"), ("inputs", "outputs", "triton", "offline")),
    "online": ((*_SERVE, "perf"), ("inputs", "outputs", "triton", "online")),
    "rate": ((*_SERVE, "perf"), ("inputs", "outputs", "triton", "online", "rate")),
    # a configuration search's point (deploybench.search): both scenarios on its settings
    "search_point": ((*_SERVE, "perf", "search_point"),
                     ("inputs", "outputs", "triton", "offline", "online")),
}


# Steps that send requests: an ensemble's are made from its `ensemble` section
# (ensemble.requests), the offline ones from samples of its data split (perf_samples)
# after a warm-up of training samples (warmup_samples) in requests of the accuracy
# step's batch (the reference's warm-up is its accuracy run); a single model's steps keep
# their settings without them.
REQUEST_STEPS = {"accuracy": ("ensemble",),
                 "offline": ("ensemble", "plugin", "hparams", "data", "accuracy")}
# The ensemble settings only the offline step reads: a change re-runs nothing else.
OFFLINE_ENSEMBLE = ("perf_samples", "warmup_samples")
# Where the sparse model keeps its rows (ensemble.parts.store): load-time settings, which no
# export depends on, with the defaults a model's `ensemble` section may leave out.
STORE_DEFAULTS = {"placement": "fit", "device_share": 0.5}
STORE_SETTINGS = ("cache_fraction", *STORE_DEFAULTS)


def store_settings(ensemble: dict) -> dict:
    """An `ensemble` section's store settings, the defaults filled in (ensemble.parts.store,
    and the configuration report's wording of them)."""
    return {"cache_fraction": float(ensemble["cache_fraction"]),
            **{k: ensemble.get(k, v) for k, v in STORE_DEFAULTS.items()}}


def step_spec(run: dict, step: str) -> dict:
    """The part of `run` that `step` depends on (the full run for the report)."""
    if step not in STEP_FIELDS:
        return run
    run_fields, model_fields = STEP_FIELDS[step]
    if step in REQUEST_STEPS and is_ensemble(run):
        model_fields = (*model_fields, *REQUEST_STEPS[step])
    spec = {k: run[k] for k in run_fields if k in run}
    spec["model"] = {k: run["model"][k] for k in model_fields if k in run["model"]}
    if "ensemble" in spec["model"] and step != "offline":
        spec["model"]["ensemble"] = {k: v for k, v in spec["model"]["ensemble"].items()
                                     if k not in OFFLINE_ENSEMBLE}
    return spec
