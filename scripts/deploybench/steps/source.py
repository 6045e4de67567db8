"""Per model, independent of GPU and backend: weights, data, evaluation set, perf data."""

from __future__ import annotations

import json
from pathlib import Path

from .. import plugins
from ..records import atomic
from ..source import model as source_model
from ..tensors import check_arrays, numpy_dtype

PERF_SAMPLES = 32  # perf_analyzer's --input-data entries, used round-robin


def weights(spec: dict, out: Path) -> None:
    with atomic.output(out) as tmp:
        source_model.save_weights(spec, tmp)


def generate_data(spec: dict, out: Path) -> None:
    """A small dataset in the model's real format (when the config names none)."""
    plugin = plugins.load(spec["plugin"])
    with atomic.output(out) as tmp:
        tmp.mkdir()
        plugin.generate_dataset(spec["hparams"], str(tmp), **spec["data"]["generate"])


def eval_set(spec: dict, weights: Path, data: Path, out: Path) -> None:
    """Evaluation samples, their targets and the source model's FP32 outputs (npz; none
    where the model has no source model)."""
    plugin = plugins.load(spec["plugin"])
    split = spec["data"]
    inputs, targets = plugin.load_split(spec["hparams"], str(data), split["split"],
                                        split["samples"])
    check_arrays(spec["inputs"], inputs, f"data from '{data}'")
    refused = source_model.refusal(spec)
    if refused:  # the samples alone: what is measured is sent, nothing is compared
        print(f"no source model outputs: {refused}")
        outputs = []
    else:
        outputs = source_model.run(source_model.load(spec, weights), inputs, batch_size=64)
        check_arrays(spec["outputs"], outputs, "source model outputs")
    with atomic.output(out) as tmp:
        source_model.save_eval(spec, inputs, outputs, targets, tmp)


def perf_data(spec: dict, eval_set: Path, out: Path) -> None:
    """perf_analyzer --input-data JSON of real evaluation samples (one entry per sample),
    or what the plug-in's `perf_inputs` makes of them (its reference's perf input)."""
    inputs, _, _ = source_model.load_eval(spec, eval_set)
    plugin = plugins.load(spec["plugin"])
    if hasattr(plugin, "perf_inputs"):
        inputs = plugin.perf_inputs(spec["hparams"], inputs)
    entries = []
    for i in range(min(PERF_SAMPLES, len(inputs[0]))):
        entries.append({
            t["name"]: {"content": a[i].astype(numpy_dtype(t["dtype"])).ravel().tolist(),
                        "shape": list(a[i].shape)}
            for t, a in zip(spec["inputs"], inputs)
        })
    with atomic.output(out) as tmp:
        tmp.write_text(json.dumps({"data": entries}))
