"""Accuracy on Triton: the plug-in's metric over the served outputs beside the source
model's, and each output's deviation from the source model within its limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts, plugins, serving
from ..measurement import device, provenance
from ..measurement.telemetry import Telemetry
from ..records import atomic, formats
from ..records.tables import ACCURACY_COLUMNS
from ..runners.quantization import CALIBRATION, SCHEMES
from ..settings import deployments
from ..source import model as source_model
from ..sweeps import record
from ..triton import config as triton_config
from ..triton import repository as triton_repository
from ..triton.client import infer_all


def accuracy(spec: dict, repository: Path, eval_set: Path, out_csv: Path, out_json: Path,
             server_log: Path) -> None:
    model = spec["model"]
    refused = source_model.refusal(model)
    if refused:  # an `accuracy` section written by hand beside no source model
        raise ValueError(f"no accuracy step: {refused}")
    batch = model["accuracy"]["batch_size"]
    deployment = deployments.for_scenario(spec, "accuracy", batch)
    print(f"accuracy on deployment '{deployment.name}' (max batch size "
          f"{deployment.max_batch_size}), batches of {batch}")
    config_pbtxt = triton_repository.config_path(repository, deployment.name)
    inputs, reference, targets = source_model.load_eval(model, eval_set)
    with (serving.served(spec, config_pbtxt, server_log) as (server, prov),
          Telemetry(provenance.measured_devices(prov), server_pids=server.pids) as sampled):
        outputs = infer_all(server.grpc_url, spec, inputs, batch,
                            triton_config.served_inputs(config_pbtxt),
                            server.served_name(deployment.name),
                            artifacts.of(spec).request_encoder(spec, config_pbtxt), server.version)
        cache = artifacts.cache_report(server.metrics())
    plugin = plugins.load(model["plugin"])
    on_triton = plugin.evaluate(model["hparams"], outputs, targets)
    on_source = plugin.evaluate(model["hparams"], reference, targets)
    rows = [{"name": k, "kind": "metric", "triton": v, "source": on_source[k],
             "limit": None, "passed": None} for k, v in on_triton.items()]
    rows += metric_changes(model["accuracy"], spec["precision"], on_triton, on_source)
    limits = model["accuracy"]["max_abs_deviation"]
    for tensor, got, ref in zip(model["outputs"], outputs, reference):
        limit = limits.get("outputs", {}).get(tensor["name"], {}).get(spec["precision"],
                                                                      limits[spec["precision"]])
        dev = float(np.abs(got.astype(np.float64) - ref).max())
        rows.append({"name": f"max_abs_deviation:{tensor['name']}", "kind": "deviation",
                     "triton": dev, "source": 0.0, "limit": limit,
                     "passed": bool(dev <= limit)})
        if np.issubdtype(got.dtype, np.integer):  # lengths, ids: share of exact samples
            same = (got.reshape(len(got), -1) == ref.reshape(len(ref), -1)).all(axis=1)
            rows.append({"name": f"agreement:{tensor['name']}", "kind": "agreement",
                         "triton": float(same.mean()), "source": 1.0, "limit": None,
                         "passed": None})
    table = pd.DataFrame(rows, columns=ACCURACY_COLUMNS)
    report = {"samples": len(inputs[0]), "split": model["data"]["split"],
              "deployment": deployments.describe(deployment), **cache,
              **quantization_record(spec["precision"]),
              "telemetry": sampled.result, "provenance": prov}
    device.verify_held()  # no result where another run may have measured beside it
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.to_csv(tmp_csv, index=False)
        tmp_json.write_text(formats.text(report))
    record.archive(out_csv, out_json)
    print(table.to_string(index=False))


def metric_changes(settings: dict, precision: str, served: dict, source: dict) -> list[dict]:
    """Where the model declares a metric tolerance for `precision` (`accuracy.
    metric_tolerance`, required for a quantized one): each metric's move from the source
    model's, within atol + rtol * |source| (a NaN fails)."""
    declared = settings.get("metric_tolerance", {}).get(precision)
    if declared is None:
        return []
    rows = []
    for name, value in served.items():
        tol = {**declared, **declared.get("metrics", {}).get(name, {})}
        moved = abs(float(value) - float(source[name]))
        limit = tol["atol"] + tol["rtol"] * abs(float(source[name]))
        rows.append({"name": f"metric_change:{name}", "kind": "metric_change",
                     "triton": moved, "source": 0.0, "limit": limit,
                     "passed": bool(moved <= limit)})
    return rows


def quantization_record(precision: str) -> dict:
    """What a quantized configuration's accuracy was measured of: its torchao scheme, the
    version and what it calibrated on (none of the schemes reads data)."""
    scheme = SCHEMES.get(precision)
    if scheme is None:
        return {}
    from importlib.metadata import version

    return {"quantization": {"precision": precision, "torchao": version("torchao"),
                             "config": scheme.config, "what": scheme.what,
                             "calibration": CALIBRATION}}
