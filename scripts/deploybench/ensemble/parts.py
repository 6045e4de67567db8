"""The two parts of an ensemble run: their names, their tensors, the dense part's run."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from .. import plugins
from ..backends import BACKENDS
from ..runners.embeddings import METADATA
from ..settings.step_specs import store_settings

SPARSE, DENSE = "sparse", "dense"


def settings(model: dict) -> dict:
    """The model's `ensemble` section; a clear error for a model that has none."""
    if not model.get("ensemble"):
        raise ValueError(f"model plug-in '{model['plugin']}' has no `ensemble` section in its "
                         "config: it cannot deploy as a sparse/dense ensemble (hps-* backends)")
    return model["ensemble"]


def store(model: dict) -> dict:
    """The sparse model's store: placement (fit: every table on the device where they fit
    `device_share` of its memory; cache: a device cache over host memory), cache_fraction."""
    return store_settings(settings(model))


def names(name: str) -> dict[str, str]:
    """The Triton model names of an ensemble's parts."""
    return {SPARSE: f"{name}-{SPARSE}", DENSE: f"{name}-{DENSE}"}


def sparse_index(model: dict) -> int:
    """Position of the input the sparse model looks up among the model's inputs."""
    inputs = [t["name"] for t in model["inputs"]]
    wanted = settings(model)["sparse_input"]
    if wanted not in inputs:
        raise ValueError(f"ensemble.sparse_input '{wanted}' is not an input of the model "
                         f"(its inputs: {', '.join(inputs)})")
    return inputs.index(wanted)


def read_metadata(sparse_dir: Path) -> dict:
    return json.loads((Path(sparse_dir) / METADATA).read_text())


def lookup_tensor(model: dict, meta: dict) -> dict:
    width = len(meta["table_sizes"]) * int(meta["embedding_dim"])
    return {"name": settings(model)["lookup"], "dtype": "FP32", "dims": [width]}


def dense_inputs(model: dict, meta: dict) -> list[dict]:
    """The model's inputs with the sparse one replaced by the looked-up vectors."""
    inputs = copy.deepcopy(model["inputs"])
    inputs[sparse_index(model)] = lookup_tensor(model, meta)
    return inputs


def dense_run(run: dict, meta: dict) -> dict:
    """The run of the dense part: served as the ensemble's dense backend key serves a
    model, with the dense inputs."""
    dense = copy.deepcopy(run)
    backend = BACKENDS[run["backend"]["dense"]]
    dense["backend"] = backend.as_dict()
    dense["artifact"] = backend.artifact
    dense["model"]["inputs"] = dense_inputs(run["model"], meta)
    return dense


def split_model(model_settings: dict, model):
    """(embedding tables as float32 arrays, dense Keras model) of a plug-in's model."""
    plugin = plugins.load(model_settings["plugin"])
    if not hasattr(plugin, "split"):
        raise ValueError(f"model plug-in '{model_settings['plugin']}' has no split(): it "
                         "cannot deploy as a sparse/dense ensemble")
    return plugin.split(model)


def dense_model(model_settings: dict, model) -> tuple[object, list[dict]]:
    """The dense part of a source model and its inputs (the looked-up vectors in place of
    the ids), as the dense export takes them."""
    tables, dense = split_model(model_settings, model)
    meta = {"table_sizes": [len(t) for t in tables], "embedding_dim": tables[0].shape[1]}
    return dense, dense_inputs(model_settings, meta)
