"""The FP32 source model every comparison starts from: built from its plug-in, its weights
file, its outputs; and the evaluation set (eval.npz) it was run on.

Everything downstream (export, conversion check, accuracy) reads the same weights file
and the same evaluation samples, so every comparison is against one reference.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from .. import plugins
from ..tensors import batched, numpy_dtype


def describe_weights(settings: dict) -> str:
    own = getattr(plugins.load(settings["plugin"]), "describe_weights", None)
    if own is not None:  # a user's model file: the weights are the file's
        return own(settings["hparams"])
    ckpt = settings["weights"]["checkpoint"]
    if ckpt:
        return f"checkpoint {ckpt}"
    return f"seeded random initialisation (seed {settings['weights']['seed']})"


def refusal(settings: dict) -> str | None:
    """Why a model has no source model to run in-process (a user's Triton repository added
    without one: its plug-in's `source_refusal`), None where it has one."""
    own = getattr(plugins.load(settings["plugin"]), "source_refusal", None)
    return own(settings["hparams"]) if own is not None else None


def framework(settings: dict) -> str:
    """The plug-in's framework: torch (default) or tensorflow (FRAMEWORK = "tensorflow")."""
    return getattr(plugins.load(settings["plugin"]), "FRAMEWORK", "torch")


def _require(settings: dict) -> str:
    """framework(settings), refused by name where it is not installed: a TensorFlow plug-in's
    model is built, exported and run with TensorFlow and Keras, which the lent GPU machine
    lacks unless their bundle is carried there (docs/gpus.md)."""
    name = framework(settings)
    if name == "tensorflow":
        # the tensorflow-cpu bundle of an offline machine (scripts/machines/offline_env.sh
        # names it):
        # on this process's path alone, so that the other steps run with the machine's
        # packages as they are (the bundle brings optree, which torch can take up)
        bundled = os.environ.get("DEPLOYBENCH_TENSORFLOW_SITE")
        if bundled and bundled not in sys.path:
            sys.path.insert(0, bundled)
        try:
            import keras  # noqa: F401
            import tensorflow  # noqa: F401
        except ImportError as err:
            raise RuntimeError(
                f"model '{settings['plugin']}' is a TensorFlow (Keras) model, and {err.name} "
                "is not installed here: its weights, evaluation set and exports need "
                "TensorFlow (bash scripts/setup.sh tf; on an offline machine, the "
                "tensorflow-cpu bundle: docs/gpus.md)") from err
    return name


def _built(model, settings: dict):
    """A Keras model with its variables created (a subclassed one makes them on call)."""
    if not model.built:
        model([np.zeros((1, *t["dims"]), dtype=numpy_dtype(t["dtype"]))
               for t in settings["inputs"]])
    return model


def save_weights(settings: dict, out: Path) -> None:
    """The weights file every later step starts from (torch.save of tensors for both
    frameworks: a Keras model's weights as a list, in get_weights() order)."""
    import torch  # here, not above: the measuring steps import this module, never torch

    if refusal(settings):  # no model: the file says where the served one came from
        torch.save({"state_dict": {}, "origin": describe_weights(settings)}, out)
        return
    tensorflow = _require(settings) == "tensorflow"
    plugin = plugins.load(settings["plugin"])
    w = settings["weights"]
    model = plugin.build_model(settings["hparams"], w["checkpoint"], w["seed"])
    if tensorflow:
        state = {"keras_weights": [torch.from_numpy(np.array(v))
                                   for v in _built(model, settings).get_weights()]}
    else:
        state = {"state_dict": model.state_dict()}
    torch.save({**state, "origin": describe_weights(settings)}, out)


def load(settings: dict, weights: Path):
    """The FP32 source model (torch.nn.Module in eval mode, or a Keras model)."""
    import torch

    tensorflow = _require(settings) == "tensorflow"
    plugin = plugins.load(settings["plugin"])
    model = plugin.build_model(settings["hparams"], None, settings["weights"]["seed"])
    saved = torch.load(weights, map_location="cpu", weights_only=True)
    if tensorflow:
        _built(model, settings).set_weights([t.numpy() for t in saved["keras_weights"]])
        return model
    model.load_state_dict(saved["state_dict"])
    return model.eval()


def weights_origin(weights: Path) -> str:
    import torch

    return torch.load(weights, map_location="cpu", weights_only=True)["origin"]


def run(model, inputs: list[np.ndarray], batch_size: int) -> list:
    """Outputs of a source model (torch or Keras) over `inputs`, batch by batch, as numpy
    arrays."""
    import torch

    if not isinstance(model, torch.nn.Module):  # Keras: inference mode, numpy out
        def infer_keras(arrays):
            result = model(arrays, training=False)
            result = result if isinstance(result, (tuple, list)) else (result,)
            return [np.asarray(r) for r in result]

        return batched(infer_keras, inputs, batch_size)

    def infer(arrays):
        result = model(*[torch.from_numpy(a) for a in arrays])
        result = result if isinstance(result, (tuple, list)) else (result,)
        return [r.numpy() for r in result]  # the FP32 source model: dtypes as declared

    with torch.inference_mode():
        return batched(infer, inputs, batch_size)


def save_eval(settings: dict, inputs: list, outputs: list, targets: list, out: Path) -> None:
    """eval.npz: the samples (by input name), the source model's outputs
    (`reference:<output>`) and the plug-in's targets (`target:<i>`)."""
    arrays = {t["name"]: a for t, a in zip(settings["inputs"], inputs)}
    arrays |= {f"reference:{t['name']}": a for t, a in zip(settings["outputs"], outputs)}
    arrays |= {f"target:{i}": a for i, a in enumerate(targets)}
    with open(out, "wb") as f:
        np.savez(f, **arrays)


def load_eval(settings: dict, path: Path) -> tuple[list, list, list]:
    """(inputs, source model outputs, targets) of the evaluation npz (no outputs where the
    model has no source model: `refusal`)."""
    with np.load(path) as npz:
        inputs = [npz[t["name"]] for t in settings["inputs"]]
        reference = [npz[f"reference:{t['name']}"] for t in settings["outputs"]
                     if f"reference:{t['name']}" in npz.files]
        keys = [k for k in npz.files if k.startswith("target:")]
        targets = [npz[k] for k in sorted(keys, key=lambda k: int(k.split(":")[1]))]
    return inputs, reference, targets
