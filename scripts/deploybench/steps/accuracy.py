"""Accuracy on Triton: the plug-in's metric over the served outputs beside the source
model's, and each output's deviation from the source model within its limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import artifacts, atomic, deployments, plugins, serving, source_model
from ..measurement import device, provenance
from ..measurement.telemetry import Telemetry
from ..tables import ACCURACY_COLUMNS
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
    with serving.served(spec, config_pbtxt, server_log) as (server, prov), \
            Telemetry(provenance.measured_devices(prov), server_pids=server.pids) as sampled:
        outputs = infer_all(server.grpc_url, spec, inputs, batch,
                            triton_config.served_inputs(config_pbtxt),
                            server.served_name(deployment.name),
                            artifacts.of(spec).request_encoder(spec, config_pbtxt), server.version)
        cache = serving.cache_report(server)
    plugin = plugins.load(model["plugin"])
    on_triton = plugin.evaluate(model["hparams"], outputs, targets)
    on_source = plugin.evaluate(model["hparams"], reference, targets)
    rows = [{"name": k, "kind": "metric", "triton": v, "source": on_source[k],
             "limit": None, "passed": None} for k, v in on_triton.items()]
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
              "telemetry": sampled.result, "provenance": prov}
    device.verify_held()  # no result where another run may have measured beside it
    with atomic.output(out_csv) as tmp_csv, atomic.output(out_json) as tmp_json:
        table.to_csv(tmp_csv, index=False)
        tmp_json.write_text(atomic.json_text(report))
    serving.archive(out_csv, out_json)
    print(table.to_string(index=False))
