"""A run key resolved into its settings.

A run key is model × gpu × backend × precision. `Settings.run()` turns a key into the
plain dict every step reads (`run["model"]`, `run["gpu"]`, `run["backend"]`, ...), and
refuses an unknown key or an impossible combination with a message that lists what
would be valid. Errors here are raised while Snakemake builds the DAG, before any job.
A key is resolved once per process: planning the full matrix asks for each thousands of
times (one per job and per setting of a job), so treat a returned run as read-only.
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path

from ..backends import BACKENDS, EXPORT_ARTIFACTS, EXPORT_PRECISION, FLOAT_PRECISIONS
from ..models import memory
from ..records import layout
from . import deployments, input_digest
from .config import ROOT, Configuration, check_batches, check_main, require_choice
from .config_files import ConfigError, load_yaml
from .merge import deep_merge
from .run_facts import protocol, scenario_modes, window
from .step_specs import OFFLINE_ENSEMBLE, STORE_SETTINGS

# Registry fields that say where a cluster runs a key (deploybench.settings.cluster) and how much
# memory its device has (read while planning), not what a step reads: kept out of the run,
# so that editing them re-runs nothing.
SCHEDULER_FIELDS = ("slurm", "kubernetes", "memory_gib")



class Settings(Configuration):
    """The validated configuration (config.Configuration) and each run key resolved once
    into the plain dict every step reads; the keys of the matrix and of the reference
    documents' tables."""

    def reference(self, model: str) -> dict | None:
        """The model's published reference rows (table path resolved), if it has them, and
        how its document measured (`protocol`: document_protocol; not for a model without
        pairs, dlrm-large)."""
        ref = self.models[model].get("reference")
        if not ref:
            return None
        ref = {**ref, "path": str(self._path(ref["table"]))}
        if ref.get("pairs") and model not in self._protocols:
            self._protocols[model] = self.document_protocol(model, ref)
        return {**ref, "protocol": self._protocols[model]} if ref.get("pairs") else ref

    def document_protocol(self, model: str, ref: dict) -> dict:
        """How a reference document measured, as this pipeline runs it on a GPU key of the
        document's tables (its first pair's run): each scenario's perf_analyzer settings as
        a measurement records them, the Triton settings and, by configuration, the precision
        its export is written in (reporting.protocol holds measurements to it)."""
        from ..records.tables import published_gpus, reference_rows  # pandas: not when planning

        rows = reference_rows(Path(ref["path"]), ref["document"], ref.get("where", {}))
        gpu = sorted({g for gpus in published_gpus(rows).values() for g in gpus})[0]
        run = self.run(model, gpu, *next(iter(ref["pairs"].values())).rsplit("_", 1))
        recorded = {scenario: _recorded(run, scenario) for scenario in ("offline", "online")}
        exports = {}
        for backend in self.models[model]["backends"]:
            for precision in FLOAT_PRECISIONS:  # the documents measured no other
                try:
                    exports[f"{backend}_{precision}"] = self.export_precision(
                        model, gpu, backend, precision)
                except ConfigError:  # a precision the format cannot export: none measured
                    continue
        triton = run["model"]["triton"]
        return {**recorded, "export_precision": exports, "triton": {
            k: triton[k] for k in ("max_batch_size", "instances", "max_queue_delay_us",
                                   "preferred_batch_sizes")}}

    def reference_targets(self) -> list[tuple[str, str, str, str]]:
        """The configuration that reproduces each published table of each model's reference
        document, on every GPU key the table was measured on (reference.pairs)."""
        targets = []
        for model in self.models:
            reference = self.reference(model)
            if not reference:
                continue
            pairs = reference.get("pairs", {})
            from ..records.tables import published_gpus, reference_rows  # pandas: not when planning

            rows = reference_rows(Path(reference["path"]), reference["document"],
                                  reference.get("where", {}))
            for name, gpus in published_gpus(rows).items():
                if name not in pairs:
                    raise ConfigError(
                        f"model '{model}': the published table '{name}' of "
                        f"{reference['document']} has no configuration in reference.pairs; "
                        f"add e.g. \"{name}\": <backend>_<precision> (backends: "
                        f"{', '.join(self.models[model]['backends'])})")
                backend, precision = pairs[name].rsplit("_", 1)
                for gpu in gpus:
                    self.check_key(model, gpu, backend, precision)
                    targets.append((model, gpu, backend, precision))
        return sorted(set(targets))

    def perf_settings(self, gpu: str) -> dict:
        """perf with the perf_overrides of this GPU key's kind, then of the key, merged in."""
        overrides = self.config.get("perf_overrides") or {}
        return reduce(deep_merge, (overrides.get(k, {}) for k in (self.gpus[gpu]["kind"], gpu)),
                      self.config["perf"])

    def export_settings(self, model: str) -> dict:
        """What the export of a model depends on (independent of GPU and backend)."""
        require_choice("model", model, self.models)
        raw = self.models[model]
        return {k: raw[k] for k in ("plugin", "hparams", "weights", "data", "inputs", "outputs")}

    def dataset(self, model: str) -> str:
        """The user's dataset when configured, else the generated one."""
        path = self.export_settings(model)["data"]["path"]
        return path if path else layout.fill(layout.source("data"), model=model)

    def split_export_settings(self, model: str) -> dict:
        """What the sparse and dense exports of an ensemble depend on: the export's
        settings and the ensemble's tensors (not the cache, a load-time setting, nor
        what the offline step sends)."""
        ensemble = self.models[model].get("ensemble") or {}
        return {**self.export_settings(model),
                "ensemble": {k: v for k, v in ensemble.items()
                             if k not in STORE_SETTINGS and k not in OFFLINE_ENSEMBLE}}

    def run(self, model: str, gpu: str, backend: str, precision: str) -> dict:
        key = (model, gpu, backend, precision)
        if key not in self._runs:
            self._runs[key] = self._resolve(*key)
        return self._runs[key]

    def _resolve(self, model: str, gpu: str, backend: str, precision: str) -> dict:
        self.check_key(model, gpu, backend, precision)
        backend_spec = BACKENDS[backend]
        settings = self.model_settings(model, gpu, backend)
        check_batches(model, gpu, backend, settings)
        _check_gpus(model, gpu, self.gpus[gpu], settings)
        refused = (input_digest.missing(model, settings)
                   or memory.refusal(model, gpu, self.gpus[gpu], settings, precision))
        if refused:
            raise ConfigError(refused)
        exported = self.export_precision(model, gpu, backend, precision)
        return {
            "key": {"model": model, "gpu": gpu, "backend": backend, "precision": precision},
            "model": settings,
            "gpu": {"key": gpu, **{k: v for k, v in self.gpus[gpu].items()
                                   if k not in SCHEDULER_FIELDS}},
            "backend": backend_spec.as_dict(),
            "precision": precision,
            "artifact": backend_spec.artifact,
            "export_artifact": EXPORT_ARTIFACTS[backend_spec.export],
            # only where it is not FP32 (backends.export_precision)
            **({"export_precision": exported} if exported != EXPORT_PRECISION else {}),
            "server": self.config["server"],
            "perf": self.perf_settings(gpu),
            "native": self.config["native"],
            "allow_gpu_mismatch": self.config.get("allow_gpu_mismatch", False),
        }

    def matrix(self) -> list[tuple[str, str, str, str]]:
        """Every valid key of the configured matrix."""
        m = self.config["matrix"]
        keys = []
        for model in m["models"]:
            for gpu in m["gpus"]:
                for backend in m["backends"]:
                    for precision in m["precisions"]:
                        try:
                            self.check_key(model, gpu, backend, precision)
                        except ConfigError:
                            continue
                        keys.append((model, gpu, backend, precision))
        return keys


def settings_of(configfiles=(), root: Path = ROOT) -> Settings:
    """The settings of `snakemake --configfile FILE...` outside Snakemake (a benchmark
    script, a report put together by hand): config/config.yaml, each file merged over it in
    order, checked as the Snakefile checks them."""
    config = load_yaml(Path(root) / "config" / "config.yaml")
    for path in configfiles:
        config = deep_merge(config, load_yaml(path))
    check_main(config)
    return Settings(config, root=root)


def _check_gpus(model: str, gpu: str, device: dict, settings: dict) -> None:
    """A deployment over several GPUs needs a GPU key."""
    gpus = deployments.gpu_count(settings["triton"])
    if gpus > 1 and device["kind"] != "gpu":
        raise ConfigError(f"model '{model}' on key '{gpu}': triton.gpus {gpus} needs a GPU "
                          f"key ('{gpu}' serves on the host's CPUs); set it to 1 or use a "
                          "GPU key")


def _recorded(run: dict, scenario: str) -> dict:
    """A scenario's perf_analyzer settings as its measurement records them."""
    mode, interval_ms, count = window(run, scenario)
    settings = run["model"][scenario]
    return {"protocol": protocol(run, scenario), "measurement_mode": mode,
            "measurement_interval_ms": interval_ms, "measurement_request_count": count,
            "warmup_windows": settings.get("warmup_windows", 0),
            "warmup_levels": settings.get("warmup_levels"),
            "shared_memory": scenario_modes(settings, scenario)[:1]}
