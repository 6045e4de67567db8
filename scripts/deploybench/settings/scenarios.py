"""Which of the optional scenarios a configuration is measured in: the open-loop rate
scenario (its model's `rate` section, merged for its backend and device), the steps that
need a server the pipeline starts itself (not on server.kind remote), and those a user's
repository served as it is has not (native: no runner of ours; accuracy: a model config
without an `accuracy` section, which add-model writes for a repository without a source
model)."""

from __future__ import annotations

from ..backends import served_as_is
from .config import SCHEMA_DIR
from .config_files import load_yaml
from .run_facts import online_refusal


def rate_refusal(run: dict) -> str | None:
    """Why a configuration has no rate scenario (its model's `rate`, merged for its backend
    and device, absent or incomplete; an ensemble, which has no online deployment), None
    where it has one."""
    settings, key = run["model"].get("rate"), run["key"]
    where = f"model '{key['model']}' on GPU key '{key['gpu']}', backend '{key['backend']}'"
    if not settings:
        return f"no rate scenario for {where}: its model config has no `rate` section there"
    if online_refusal(run):
        return online_refusal(run)
    required = load_yaml(SCHEMA_DIR / "model.schema.yaml")["properties"]["rate"]["allOf"][1]
    missing = [k for k in required["required"] if k not in settings]
    given = [k for k in ("rates", "rates_of_peak") if k in settings]
    if len(given) == 2:
        return f"rate scenario of {where}: `rate` gives both rates and rates_of_peak: keep one"
    if not given:
        missing.append("rates (or rates_of_peak)")
    if missing:
        return f"rate scenario of {where}: `rate` lacks {', '.join(missing)}"
    offered = settings[given[0]]
    if list(offered) != sorted(set(offered)):
        return f"rate scenario of {where}: rate.{given[0]} {offered} are not increasing"
    return None


def serves_rate(run: dict) -> bool:
    """Whether a configuration is measured at open-loop arrival rates (rate.csv)."""
    return rate_refusal(run) is None


# The steps that need a server (or a device) of the pipeline's own, and why
OWN_SERVER_STEPS = {
    "floor": "an identity model loaded beside the configuration's",
    "native": "the model in-process on the device that serves it, beside that server",
}


def own_server_refusal(run: dict, step: str) -> str | None:
    """Why `step` (floor, native) is not built for a configuration: on server.kind remote
    the pipeline starts no server and the serving device is not here; None otherwise."""
    if run["server"]["kind"] != "remote":
        return None
    return (f"server.kind remote measures a server someone else runs ("
            f"{run['server']['remote']['http_url']}); {step} needs a server the pipeline "
            f"starts itself ({OWN_SERVER_STEPS[step]}): build it with server.kind embedded, "
            "binary or container")


def own_server(run: dict) -> bool:
    """Whether the pipeline starts the configuration's server (floor and native built)."""
    return run["server"]["kind"] != "remote"


def step_refusal(run: dict, step: str) -> str | None:
    """Why a configuration has no `step` (accuracy, native, floor; None where it has):
    floor and native need a server of the pipeline's own (own_server_refusal); native a
    runner of ours, which a repository served as it is has not; accuracy its model
    config's `accuracy` section."""
    key = run["key"]
    if step in OWN_SERVER_STEPS and own_server_refusal(run, step):
        return own_server_refusal(run, step)
    if step == "native" and served_as_is(run):
        return (f"backend '{key['backend']}' of model '{key['model']}' serves a Triton model "
                "repository as it is, by the backend its config.pbtxt names: no converted "
                "model or runner of ours to run in-process")
    if step == "accuracy" and "accuracy" not in run["model"]:
        return (f"no accuracy step for model '{key['model']}': its model config has no "
                "`accuracy` section (a Triton model repository added without --source has "
                "no source model to compare its served outputs with)")
    return None
