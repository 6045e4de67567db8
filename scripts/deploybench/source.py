"""The model source side: weights, the evaluation data, native reference outputs.

Everything downstream (export, conversion check, accuracy) reads the same weights file
and the same evaluation samples, so every comparison is against one reference.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from . import atomic, plugins
from .tensors import batched, check_arrays, numpy_dtype


def describe_weights(settings: dict) -> str:
    ckpt = settings["weights"]["checkpoint"]
    if ckpt:
        return f"checkpoint {ckpt}"
    return f"seeded random initialisation (seed {settings['weights']['seed']})"


def make_weights(settings: dict, out: Path) -> None:
    plugin = plugins.load(settings["plugin"])
    w = settings["weights"]
    model = plugin.build_model(settings["hparams"], w["checkpoint"], w["seed"])
    with atomic.output(out) as tmp:
        torch.save({"state_dict": model.state_dict(), "origin": describe_weights(settings)}, tmp)


def load_model(settings: dict, weights: Path) -> torch.nn.Module:
    plugin = plugins.load(settings["plugin"])
    model = plugin.build_model(settings["hparams"], None, settings["weights"]["seed"])
    model.load_state_dict(torch.load(weights, map_location="cpu")["state_dict"])
    return model.eval()


def weights_origin(weights: Path) -> str:
    return torch.load(weights, map_location="cpu")["origin"]


def generate_data(settings: dict, out_dir: Path) -> None:
    plugin = plugins.load(settings["plugin"])
    with atomic.output(out_dir) as tmp:
        tmp.mkdir()
        plugin.generate_dataset(settings["hparams"], str(tmp), **settings["data"]["generate"])


def run_model(model: torch.nn.Module, inputs: list[np.ndarray], batch_size: int) -> list:
    """Outputs of an in-process model over `inputs`, batch by batch, as numpy arrays."""
    def infer(arrays):
        result = model(*[torch.from_numpy(a) for a in arrays])
        result = result if isinstance(result, (tuple, list)) else (result,)
        return [r.numpy() for r in result]  # the FP32 source model: dtypes as declared

    with torch.inference_mode():
        return batched(infer, inputs, batch_size)


def make_eval(settings: dict, weights: Path, data_dir: Path, out: Path) -> None:
    """Evaluation samples, their targets and the source model's FP32 outputs (npz)."""
    plugin = plugins.load(settings["plugin"])
    data = settings["data"]
    inputs, targets = plugin.load_split(
        settings["hparams"], str(data_dir), data["split"], data["samples"]
    )
    check_arrays(settings["inputs"], inputs, f"data from '{data_dir}'")
    outputs = run_model(load_model(settings, weights), inputs, batch_size=64)
    check_arrays(settings["outputs"], outputs, "source model outputs")
    arrays = {t["name"]: a for t, a in zip(settings["inputs"], inputs)}
    arrays |= {f"reference:{t['name']}": a for t, a in zip(settings["outputs"], outputs)}
    arrays |= {f"target:{i}": a for i, a in enumerate(targets)}
    with atomic.output(out) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def load_eval(settings: dict, path: Path) -> tuple[list, list, list]:
    """(inputs, reference outputs, targets) of the evaluation npz."""
    with np.load(path) as npz:
        inputs = [npz[t["name"]] for t in settings["inputs"]]
        reference = [npz[f"reference:{t['name']}"] for t in settings["outputs"]]
        keys = [k for k in npz.files if k.startswith("target:")]
        targets = [npz[k] for k in sorted(keys, key=lambda k: int(k.split(":")[1]))]
    return inputs, reference, targets


def make_perf_data(settings: dict, eval_npz: Path, out: Path, samples: int = 32) -> None:
    """perf_analyzer --input-data JSON of real evaluation samples (one entry per sample)."""
    inputs, _, _ = load_eval(settings, eval_npz)
    entries = []
    for i in range(min(samples, len(inputs[0]))):
        entries.append({
            t["name"]: {"content": a[i].astype(numpy_dtype(t["dtype"])).ravel().tolist(),
                        "shape": list(a[i].shape)}
            for t, a in zip(settings["inputs"], inputs)
        })
    with atomic.output(out) as tmp:
        tmp.write_text(json.dumps({"data": entries}))
