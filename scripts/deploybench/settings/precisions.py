"""Why a key's precision cannot be measured, worded for the refusal while the DAG is built:
a format that does not carry it, a GPU key that does not run it, a model that declares no
tolerance for a quantized one (config.Configuration.check_key asks)."""

from __future__ import annotations

from ..backends import BACKENDS, QUANTIZED, carriers
from ..runners.quantization import SCHEMES


def format_refusal(backend: str, precision: str) -> str | None:
    """A backend whose format does not carry `precision` (Backend.precisions)."""
    carried = BACKENDS[backend].precisions
    if precision in carried:
        return None
    return (f"backend '{backend}' ({BACKENDS[backend].title}) does not carry precision "
            f"'{precision}': it carries {', '.join(carried)}; {precision} is carried by "
            f"{', '.join(carriers(precision))} (torchao's quantized weights reach AOTInductor "
            "and torch.compile through torch.export; docs/backends-and-servers.md says why "
            "not the others)")


def device_refusal(gpus: dict, gpu: str, precision: str) -> str | None:
    """A GPU key whose registry entry (config/gpus.yaml) does not list `precision`."""
    entry = gpus[gpu]
    if precision in entry["precisions"]:
        return None
    keys = [k for k, e in gpus.items() if precision in e["precisions"]]
    if precision == "fp16" and entry["kind"] == "cpu":
        hint = "FP16 needs a CUDA GPU key such as h100"
    elif precision in SCHEMES and SCHEMES[precision].min_capability:
        need = ".".join(map(str, SCHEMES[precision].min_capability))
        hint = (f"{precision} needs an NVIDIA GPU of compute capability {need} or later: GPU "
                f"keys {', '.join(keys) or 'none'}")
    else:
        hint = f"GPU keys that run it: {', '.join(keys) or 'none'}"
    return (f"precision '{precision}' cannot run on GPU key '{gpu}' ({entry['kind']}); it runs "
            f"{', '.join(entry['precisions'])}; {hint}")


def declaration_refusal(model: str, settings: dict, precision: str) -> str | None:
    """A quantized precision of a model that has no accuracy step to gate it, or declares
    no tolerance for it (`settings`: the model's, merged for the key)."""
    if precision not in QUANTIZED:
        return None
    if "accuracy" not in settings:
        return (f"model '{model}' has no accuracy step (no `accuracy` section): precision "
                f"'{precision}' is measured only where the accuracy step gates it against "
                "the source model")
    wanted = {"conversion.tolerance": settings["conversion"]["tolerance"],
              "accuracy.max_abs_deviation": settings["accuracy"]["max_abs_deviation"],
              "accuracy.metric_tolerance": settings["accuracy"].get("metric_tolerance", {})}
    missing = [f"{where}.{precision}" for where, declared in wanted.items()
               if precision not in declared]
    if not missing:
        return None
    return (f"model '{model}' declares no tolerance for precision '{precision}': set "
            f"{', '.join(missing)} (the metric tolerance: each task metric against the "
            "source model's, |served - source| <= atol + rtol * |source|; "
            "config/models/tft.yaml has them)")
