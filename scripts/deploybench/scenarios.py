"""Which of the optional scenarios a configuration is measured in: the open-loop rate
scenario (its model's `rate` section, merged for its backend and device)."""

from __future__ import annotations

from .config import SCHEMA_DIR, online_refusal
from .config import _load_yaml as load_yaml


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
    if missing:
        return f"rate scenario of {where}: `rate` lacks {', '.join(missing)}"
    if list(settings["rates"]) != sorted(settings["rates"]):
        return f"rate scenario of {where}: rate.rates {settings['rates']} are not increasing"
    return None


def serves_rate(run: dict) -> bool:
    """Whether a configuration is measured at open-loop arrival rates (rate.csv)."""
    return rate_refusal(run) is None
