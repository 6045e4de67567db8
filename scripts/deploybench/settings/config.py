"""Load and validate the configuration: the main config, the GPU registry and the model
files, each checked against its schema, and a run key checked against them (its settings:
deploybench.settings.resolve).
"""

from __future__ import annotations

import os
from functools import cache, cached_property
from pathlib import Path

import jsonschema
import yaml

from ..backends import (
    BACKENDS,
    EXPORT_PRECISION,
    FLOAT_PRECISIONS,
    FP16_EXPORTS,
    PRECISIONS,
)
from ..records import baseline
from . import deployments, input_digest, precisions
from .config_files import ConfigError, load_yaml
from .merge import deep_merge
from .run_facts import shared_memory_modes

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = ROOT / "config" / "schema"


@cache
def _validator(schema_name: str):
    """A validator of one schema, built once (tests/unit/test_config.py checks the schemas)."""
    schema = load_yaml(SCHEMA_DIR / schema_name)
    return jsonschema.validators.validator_for(schema)(schema)


def validate(data: dict, schema_name: str, what: str) -> None:
    err = jsonschema.exceptions.best_match(_validator(schema_name).iter_errors(data))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(f"{what}: invalid value at '{where}': {err.message}")


_SCALARS = {"number": (int, float), "integer": (int,), "boolean": (bool,)}


def coerce_strings(data, schema_name: str) -> None:
    """Turn strings into the numbers and booleans a schema asks for, in place. Snakemake's
    `--config key=value` hands every value over as a string (`perf={attempts: 5}` gives
    '5'): "5" becomes 5 where the schema wants a number, "true" True where a boolean."""
    schema = load_yaml(SCHEMA_DIR / schema_name)

    def resolve(node: dict) -> dict:
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        return node

    def walk(value, node: dict):
        node = resolve(node)
        for part in node.get("allOf", []) + node.get("oneOf", []):
            value = walk(value, part)
        if isinstance(value, dict):
            for key in value:
                sub = node.get("properties", {}).get(key, node.get("additionalProperties"))
                if isinstance(sub, dict):
                    value[key] = walk(value[key], sub)
            return value
        if isinstance(value, list) and isinstance(node.get("items"), dict):
            return [walk(v, node["items"]) for v in value]
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        if isinstance(value, str) and "string" not in types:
            wanted = tuple(c for k in types for c in _SCALARS.get(k, ()))
            parsed = yaml.safe_load(value) if wanted else value
            if wanted and isinstance(parsed, wanted) and not (
                    isinstance(parsed, bool) and bool not in wanted):
                return parsed
        return value

    walk(data, schema)


def check_main(config: dict) -> None:
    """The main config as Snakemake merged it (--configfile, --config): strings coerced,
    then validated with a message naming the bad value's place."""
    coerce_strings(config, "config.schema.yaml")
    validate(config, "config.schema.yaml", "main config")
    refused = baseline.problem(config.get("compare", {}).get("baseline", baseline.PREVIOUS))
    if refused:
        raise ConfigError(refused)


def _extended(key: str, raw: dict[str, dict], seen: tuple[str, ...] = ()) -> dict:
    """A model config with `extends: <model>` is that model's (itself resolved) with this
    file's settings deep-merged over it (lists replaced whole): a variant of a model
    states only where it differs."""
    model = dict(raw[key])
    base = model.pop("extends", None)
    if base is None:
        return model
    if base not in raw:
        raise ConfigError(f"model config '{key}' extends '{base}', which is not a model; "
                          f"models: {', '.join(sorted(raw))}")
    if base in (key, *seen):
        raise ConfigError("model configs extend each other in a cycle: "
                          + " -> ".join((*seen, key, base)))
    return deep_merge(_extended(base, raw, (*seen, key)), model)


def require_choice(kind: str, value: str, valid) -> None:
    if value not in valid:
        raise ConfigError(f"unknown {kind} '{value}'; valid {kind}s: {', '.join(sorted(valid))}")


def _check_server(server: dict) -> None:
    """A server the pipeline starts has what its kind needs, on three different ports."""
    needed = {"binary": "binary", "container": "image"}.get(server["kind"])
    if needed and not server.get(needed):
        example = ("/opt/tritonserver/bin/tritonserver" if needed == "binary"
                   else "docker://nvcr.io/nvidia/tritonserver:24.10-py3")
        raise ConfigError(f"server.kind '{server['kind']}' needs server.{needed} "
                          f"(e.g. {example})")
    ports = server.get("ports", "auto")
    if ports != "auto" and len(set(ports.values())) < len(ports):
        given = ", ".join(f"{name} {port}" for name, port in ports.items())
        raise ConfigError(f"server.ports must be three different ports, given {given}; "
                          "change one, or set server.ports: auto")


def _load_models(models_dir: Path, overrides: dict) -> dict[str, dict]:
    """Every model config of `models_dir`, each its `extends` resolved and its
    model_overrides merged over it, validated against the model schema (and its plug-in's
    hyper-parameter schema, where it has one)."""
    raw = {path.stem: load_yaml(path) for path in sorted(models_dir.glob("*.yaml"))}
    for key in overrides:
        require_choice("model_overrides key (a model)", key, raw)
    models = {}
    for key in raw:
        path = models_dir / f"{key}.yaml"
        model = deep_merge(_extended(key, raw), overrides.get(key) or {})
        where = f" with model_overrides.{key}" if key in overrides else ""
        validate(model, "model.schema.yaml", f"model config {path}{where}")
        # the plug-in's hyper-parameters, where it has a schema (a network's sizes)
        plugin_schema = f"hparams-{model['plugin']}.schema.yaml"
        if (SCHEMA_DIR / plugin_schema).is_file():
            validate(model["hparams"], plugin_schema, f"model config {path}{where}: hparams")
        for backend in model["backends"]:
            require_choice("backend", backend, BACKENDS)
        for backend in model.get("backend_overrides", {}):
            require_choice(f"backend_overrides key (a backend of model '{key}')", backend,
                    model["backends"])
        models[key] = model
    if not models:
        raise ConfigError(f"no model configs (*.yaml) in '{models_dir}'")
    return models


class Configuration:
    """The validated configuration: main config, GPU registry and model files, each model
    merged for a GPU key and backend, and a run key checked against them (a key resolved
    into its run: resolve.Settings)."""

    def __init__(self, config: dict, root: Path = ROOT):
        validate(config, "config.schema.yaml", "main config")
        self._runs: dict[tuple[str, str, str, str], dict] = {}  # resolve.Settings.run
        self._merged: dict[tuple[str, str, str | None], dict] = {}
        self._protocols: dict[str, dict] = {}  # by model: Settings.document_protocol
        self.config = config
        self.root = Path(root)
        _check_server(config["server"])
        self.gpus = load_yaml(self._path(config["gpu_registry"]))
        validate(self.gpus, "gpus.schema.yaml", f"GPU registry {config['gpu_registry']}")
        for key in config.get("perf_overrides") or {}:
            require_choice("perf_overrides key (a GPU key or device kind)", key,
                    {*self.gpus, *(entry["kind"] for entry in self.gpus.values())})

    def _path(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else self.root / path

    @cached_property
    def models(self) -> dict[str, dict]:
        return _load_models(self._path(self.config["models_dir"]),
                            self.config.get("model_overrides") or {})

    def check_key(self, model: str, gpu: str, backend: str, precision: str) -> None:
        require_choice("model", model, self.models)
        require_choice("GPU key", gpu, self.gpus)
        require_choice("backend", backend, BACKENDS)
        require_choice("precision", precision, PRECISIONS)
        supported = self.models[model]["backends"]
        if BACKENDS[backend].dense and not self.models[model].get("ensemble"):
            raise ConfigError(f"backend '{backend}' deploys a sparse/dense ensemble; model "
                              f"'{model}' has no `ensemble` section in its config")
        if backend not in supported:
            raise ConfigError(
                f"backend '{backend}' is not configured for model '{model}'; "
                f"its backends: {', '.join(supported)}"
            )
        if BACKENDS[backend].runner is None and precision != EXPORT_PRECISION:
            raise ConfigError(f"backend '{backend}' of model '{model}' serves a Triton model "
                              f"repository as it is, in its own precision: its key's "
                              f"precision is {EXPORT_PRECISION}, not '{precision}'")
        entry = self.gpus[gpu]
        refused = (precisions.format_refusal(backend, precision)
                   or precisions.device_refusal(self.gpus, gpu, precision)
                   or precisions.declaration_refusal(
                       model, self.model_settings(model, gpu, backend), precision))
        if refused:
            raise ConfigError(refused)
        if entry["kind"] != "gpu" and "cuda" in shared_memory_modes(
                self.model_settings(model, gpu, backend)["offline"]):
            raise ConfigError(
                f"offline.shared_memory 'cuda' of model '{model}' needs a GPU; GPU key '{gpu}' "
                f"is {entry['kind']}: set it for GPU keys only (device_overrides), or use "
                "'system'")
        if BACKENDS[backend].needs_gpu and entry["kind"] != "gpu":
            raise ConfigError(
                f"backend '{backend}' ({BACKENDS[backend].title}) needs an NVIDIA GPU; GPU key "
                f"'{gpu}' is {entry['kind']}; use a GPU key ({', '.join(self.gpu_keys('gpu'))})"
            )
        self.export_precision(model, gpu, backend, precision)

    def check_all(self, targets: list[dict]) -> None:
        """Refuse a configuration error before any job, whatever already exists: every
        model's batch sizes on every GPU key, and every default target's key."""
        for model in self.models:
            for gpu in self.gpus:
                # the export at the key's highest precision: what refuses all its configurations
                highest = "fp16" if "fp16" in self.gpus[gpu]["precisions"] else "fp32"
                for backend in self.models[model]["backends"]:
                    check_batches(model, gpu, backend,
                                   self.model_settings(model, gpu, backend))
                    self.export_precision(model, gpu, backend, highest)
        for t in targets:
            self.check_key(t["model"], t["gpu"], t["backend"], t["precision"])
            missing = input_digest.missing(t["model"], self.models[t["model"]])
            if missing:
                raise ConfigError(missing)

    def export_precision(self, model: str, gpu: str, backend: str, precision: str) -> str:
        """The precision a configuration's export is written in (`export.precision`: fp32,
        fp16, or run: the configuration's), refused where it cannot serve it."""
        setting = self.model_settings(model, gpu, backend).get("export", {}).get(
            "precision", EXPORT_PRECISION)
        exported = setting
        if setting == "run":  # a quantized configuration quantizes the FP32 export
            exported = precision if precision in FLOAT_PRECISIONS else EXPORT_PRECISION
        if exported == EXPORT_PRECISION:
            return exported
        entry, fmt = self.gpus[gpu], BACKENDS[backend].export
        where = (f"export.precision '{setting}' of model '{model}', backend '{backend}' on GPU "
                 f"key '{gpu}'")
        if exported not in entry["precisions"]:
            raise ConfigError(
                f"{where}: GPU key '{gpu}' ({entry['kind']}) runs no {exported.upper()} (it runs "
                f"{', '.join(entry['precisions'])}), so no configuration of it can serve an "
                f"{exported.upper()} export; set it for GPU keys (device_overrides), or use "
                "'run' (the configuration's precision)")
        if fmt not in FP16_EXPORTS:
            raise ConfigError(
                f"{where}: the format '{fmt}' is exported in FP32 only (FP16 exports: "
                f"{', '.join(FP16_EXPORTS)}); its conversion applies the run's precision")
        if exported != precision:
            raise ConfigError(
                f"{where}: an {exported.upper()} export cannot serve the {precision.upper()} "
                f"configuration {backend}_{precision}; use 'run' (the configuration's "
                "precision) or 'fp32'")
        return exported

    def gpu_keys(self, kind: str) -> list[str]:
        return [k for k, v in self.gpus.items() if v["kind"] == kind]

    def model_settings(self, model: str, gpu: str, backend: str | None = None) -> dict:
        """The model config with the overrides of this backend, then of this GPU key's kind
        and the key, merged in (read-only: the runs of every precision share it)."""
        require_choice("model", model, self.models)
        require_choice("GPU key", gpu, self.gpus)
        if (model, gpu, backend) not in self._merged:
            raw = self.models[model]
            merged = {k: v for k, v in raw.items()
                      if k not in ("device_overrides", "backend_overrides")}
            if backend:
                merged = deep_merge(merged, raw.get("backend_overrides", {}).get(backend, {}))
            overrides = raw.get("device_overrides", {})
            for key in (self.gpus[gpu]["kind"], gpu):
                merged = deep_merge(merged, overrides.get(key, {}))
            self._merged[(model, gpu, backend)] = deployments.resolve(merged)
        return self._merged[(model, gpu, backend)]



def check_batches(model: str, gpu: str, backend: str, settings: dict) -> None:
    """Every batch size a run uses must fit the model's max batch size on that device,
    and with per-batch deployments the largest of them (what accuracy and online use)."""
    max_batch = settings["triton"]["max_batch_size"]
    if deployments.per_batch(settings):
        if BACKENDS[backend].dense:
            raise ConfigError(
                f"model '{model}': triton.deployments 'per_batch' of backend '{backend}': an "
                "ensemble (hps-*) deploys once; set it for single-model backends only")
        largest = max(deployments.fixed_batches(settings))
        sent = {"online.batch_size": settings["online"]["batch_size"],
                **({"accuracy.batch_size": settings["accuracy"]["batch_size"]}
                   if "accuracy" in settings else {})}
        for where, batch in sent.items():
            if batch > largest:
                raise ConfigError(
                    f"model '{model}' on GPU key '{gpu}', backend '{backend}': {where} {batch} "
                    f"exceeds the largest per-batch deployment (triton.deployments "
                    f"'per_batch': max batch {largest}, the largest offline.batch_sizes); "
                    "lower it or add the batch size to offline.batch_sizes")
    used = {
        "offline.batch_sizes": settings["offline"]["batch_sizes"],
        "online.batch_size": [settings["online"]["batch_size"]],
        "triton.preferred_batch_sizes": settings["triton"]["preferred_batch_sizes"],
        "triton.trt_opt_batch_size": [settings["triton"].get("trt_opt_batch_size", 1)],
        "conversion.batch_size": [settings["conversion"]["batch_size"]],
        "accuracy.batch_size": ([settings["accuracy"]["batch_size"]]
                                if "accuracy" in settings else []),
        "rate.batch_size": [settings["rate"]["batch_size"]] if "rate" in settings else [],
        **{f"{scenario}.warmup_levels": [level[0] for level in
                                         settings[scenario].get("warmup_levels", [])
                                         if isinstance(level[0], int)]
           for scenario in ("offline", "online")},
    }
    for where, sizes in used.items():
        too_big = [b for b in sizes if b > max_batch]
        if too_big:
            raise ConfigError(
                f"model '{model}' on GPU key '{gpu}': {where} {too_big} exceed "
                f"triton.max_batch_size {max_batch}"
            )
