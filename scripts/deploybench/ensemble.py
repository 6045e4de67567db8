"""Recommender ensembles (backend keys `hps-*`): seed 003's Merlin HPS + dense deployment
built from the pipeline's own parts.

A model whose config has an `ensemble` section (DLRM, DCNv2) deploys as a Triton
ensemble of two models:
- `<model>-sparse`: embedding lookups over hierarchical storage (all rows in a
  memory-mapped host file, the most frequent rows cached on the device;
  `triton_sparse_model.py`), `sparse_input` -> `lookup`;
- `<model>-dense`: the network without its embedding tables, exported (`dense-onnx`,
  `dense-savedmodel`) and converted like any model, served as the backend key `dense` of
  the ensemble backend serves a model (onnx, trt, tf-savedmodel);
wired by the ensemble's input/output maps, so clients send what the single model takes.

Artifacts: `export/sparse/` (the tables stacked in one .npy, each table's rows ranked by
their frequency in the training split, sparse.json) once per model, and per
configuration `converted/model.ensemble/` = `dense/<artifact>` + `sparse/` (hard links).

Where the server has a real Merlin HPS backend (`hps`), the sparse model is HPS itself:
a python step turns the ids into HPS's fused keys, and HPS's sparse.json (the keys of
DLE's deployment/hps/deploy_sparse.py) and its embedding files are generated instead.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from . import atomic, plugins
from .formats import BACKENDS
from .repository import (
    create,
    dynamic_batching,
    instance_groups,
    served_inputs,
    tensor,
    write_config,
)
from .triton_sparse_model import METADATA, RANKING, STORAGE, HierarchicalEmbeddings

SPARSE, DENSE = "sparse", "dense"
SPARSE_MODEL = Path(__file__).with_name("triton_sparse_model.py")
KEYS_MODEL = Path(__file__).with_name("triton_hps_keys_model.py")
HPS_BACKEND = "hps"


def settings(model: dict) -> dict:
    """The model's `ensemble` section; a clear error for a model that has none."""
    if not model.get("ensemble"):
        raise ValueError(f"model plug-in '{model['plugin']}' has no `ensemble` section in its "
                         "config: it cannot deploy as a sparse/dense ensemble (hps-* backends)")
    return model["ensemble"]


def sparse_index(model: dict) -> int:
    """Position of the input the sparse model looks up among the model's inputs."""
    names = [t["name"] for t in model["inputs"]]
    wanted = settings(model)["sparse_input"]
    if wanted not in names:
        raise ValueError(f"ensemble.sparse_input '{wanted}' is not an input of the model "
                         f"(its inputs: {', '.join(names)})")
    return names.index(wanted)


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


def split_model(settings_: dict, model):
    """(embedding tables as float32 arrays, dense Keras model) of a plug-in's model."""
    plugin = plugins.load(settings_["plugin"])
    if not hasattr(plugin, "split"):
        raise ValueError(f"model plug-in '{settings_['plugin']}' has no split(): it cannot "
                         "deploy as a sparse/dense ensemble")
    return plugin.split(model)


# ---- the sparse export: tables and frequency ranking --------------------------------

def export_sparse(model_settings: dict, weights: Path, data_dir: Path, out: Path) -> None:
    """`out/`: embeddings.npy (every table's rows, stacked), ranking.npy (per table, its
    global rows from most to least frequent in the frequency split; unseen rows last, in
    order) and sparse.json."""
    from . import source

    plugin = plugins.load(model_settings["plugin"])
    ens = settings(model_settings)
    tables, _ = split_model(model_settings, source.load_model(model_settings, weights))
    inputs, _ = plugin.load_split(model_settings["hparams"], str(data_dir),
                                  ens["frequency_split"], None)
    ids = np.asarray(inputs[sparse_index(model_settings)]).astype(np.int64)
    sizes = [int(t.shape[0]) for t in tables]
    widths = {int(t.shape[1]) for t in tables}
    if len(widths) != 1:
        raise ValueError(f"the embedding tables have different widths {sorted(widths)}; "
                         "the sparse model stacks them and needs one")
    (dim,) = widths
    with atomic.output(out) as tmp:
        tmp.mkdir()
        storage = np.lib.format.open_memmap(tmp / STORAGE, mode="w+", dtype=np.float32,
                                            shape=(sum(sizes), dim))
        ranking = np.lib.format.open_memmap(tmp / RANKING, mode="w+", dtype=np.int64,
                                            shape=(sum(sizes),))
        offset = 0
        for i, (table, size) in enumerate(zip(tables, sizes)):
            storage[offset:offset + size] = table
            counts = np.bincount(np.mod(ids[:, i], size), minlength=size)
            ranking[offset:offset + size] = np.argsort(-counts, kind="stable") + offset
            offset += size
        storage.flush()
        ranking.flush()
        del storage, ranking
        (tmp / METADATA).write_text(json.dumps({
            "table_sizes": sizes, "embedding_dim": dim,
            "frequency_split": ens["frequency_split"], "frequency_samples": len(ids),
        }, indent=2))


def link_tree(src: Path, dst: Path) -> None:
    """Hard links of `src`'s files under `dst` (copies across file systems): the tables
    can be large, and every configuration of the model shares them."""
    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link)


# ---- conversion and in-process runs --------------------------------------------------

def convert(run: dict, dense_exported: Path, sparse_dir: Path, out: Path, convert_one) -> None:
    """`out/`: the dense export converted as the dense backend key converts a model
    (`convert_one(run, exported, out)`), beside the sparse storage."""
    drun = dense_run(run, read_metadata(sparse_dir))
    with atomic.output(out) as tmp:
        (tmp / DENSE).mkdir(parents=True)
        convert_one(drun, dense_exported, tmp / DENSE / drun["artifact"])
        link_tree(sparse_dir, tmp / SPARSE)


class EnsembleRunner:
    """The ensemble in-process (conversion check, native throughput): the same lookup
    code as the sparse model, then the converted dense part with the same runner as its
    Triton model; list of arrays in the model's input order -> outputs."""

    def __init__(self, converted: Path, run: dict):
        from . import runtimes

        converted = Path(converted)
        meta = read_metadata(converted / SPARSE)
        drun = dense_run(run, meta)
        device_id = runtimes.device_id(run["gpu"])
        self.sparse = HierarchicalEmbeddings(
            converted / SPARSE, float(settings(run["model"])["cache_fraction"]),
            "cpu" if device_id is None else f"cuda:{device_id}")
        self.dense = runtimes.load(converted / DENSE / drun["artifact"], drun)
        self.index = sparse_index(run["model"])

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        arrays = list(arrays)
        arrays[self.index] = self.sparse(arrays[self.index])
        return self.dense(arrays)


# ---- the model repository ------------------------------------------------------------

def part_names(name: str) -> dict[str, str]:
    return {SPARSE: f"{name}-{SPARSE}", DENSE: f"{name}-{DENSE}"}


def sparse_config(name: str, run: dict, meta: dict) -> mc.ModelConfig:
    """The python-backend sparse model: ids -> looked-up vectors."""
    model = run["model"]
    config = mc.ModelConfig(
        name=name, backend="python", max_batch_size=model["triton"]["max_batch_size"],
        input=[tensor(mc.ModelInput, model["inputs"][sparse_index(model)])],
        output=[tensor(mc.ModelOutput, lookup_tensor(model, meta))],
        instance_group=instance_groups(run), dynamic_batching=dynamic_batching(run))
    config.parameters["sparse"].string_value = SPARSE
    config.parameters["cache_fraction"].string_value = str(settings(model)["cache_fraction"])
    return config


def ensemble_config(name: str, run: dict, steps: list[tuple[str, dict, dict]]) -> mc.ModelConfig:
    """The ensemble: the model's inputs and outputs, `steps` of (model, input map, output
    map), each map from the step model's tensor to the ensemble's."""
    model = run["model"]
    config = mc.ModelConfig(
        name=name, platform="ensemble", max_batch_size=model["triton"]["max_batch_size"],
        input=[tensor(mc.ModelInput, t) for t in model["inputs"]],
        output=[tensor(mc.ModelOutput, t) for t in model["outputs"]])
    for step_model, inputs, outputs in steps:
        step = config.ensemble_scheduling.step.add(model_name=step_model, model_version=-1)
        step.input_map.update(inputs)
        step.output_map.update(outputs)
    return config


def create_repository(run: dict, converted: Path, out_config: Path,
                      available: list[str]) -> str:
    """The ensemble, its sparse and its dense model under out_config's repository;
    returns who serves the parts."""
    converted = Path(converted)
    meta = read_metadata(converted / SPARSE)
    drun = dense_run(run, meta)
    repo, name = out_config.parent.parent, out_config.parent.name
    names = part_names(name)
    dense_served = create(drun, converted / DENSE / drun["artifact"],
                          repo / names[DENSE] / "config.pbtxt", available)
    lookup = lookup_tensor(run["model"], meta)["name"]
    sparse_input = settings(run["model"])["sparse_input"]
    if HPS_BACKEND in available:
        sparse_steps = hps_repository(run, converted / SPARSE, meta, repo, names[SPARSE])
        sparse_served = "Merlin HPS"
    else:
        version = repo / names[SPARSE] / "1"
        version.mkdir(parents=True)
        shutil.copyfile(SPARSE_MODEL, version / "model.py")
        link_tree(converted / SPARSE, version / SPARSE)
        write_config(sparse_config(names[SPARSE], run, meta), version.parent / "config.pbtxt")
        sparse_steps = [(names[SPARSE], {sparse_input: sparse_input}, {lookup: lookup})]
        sparse_served = "python"
    dense_in = {t: t for t in served_inputs(repo / names[DENSE] / "config.pbtxt")}
    steps = [*sparse_steps,
             (names[DENSE], dense_in, {t["name"]: t["name"] for t in run["model"]["outputs"]})]
    out_config.parent.mkdir(parents=True, exist_ok=True)
    (out_config.parent / "1").mkdir(exist_ok=True)  # an ensemble's version folder is empty
    write_config(ensemble_config(name, run, steps), out_config)
    return f"ensemble ({sparse_served} sparse + {dense_served} dense)"


def parts(config: mc.ModelConfig) -> list[str]:
    """The models an ensemble config's steps name (empty for a single model)."""
    return [s.model_name for s in config.ensemble_scheduling.step]


# ---- a real Merlin HPS backend -------------------------------------------------------

HPS_KEYS, HPS_NUMKEYS, HPS_OUTPUT = "KEYS", "NUMKEYS", "OUTPUT0"


def hps_json(model_name: str, embedding_dir: Path, meta: dict, run: dict) -> dict:
    """HPS's parameter-server config (`--backend-config=hps,ps=<file>`), as DLE's
    deployment/hps/deploy_sparse.py writes it for a fused table."""
    tables = len(meta["table_sizes"])
    return {
        "supportlonglong": True,
        "models": [{
            "model": model_name,
            "sparse_files": [str(embedding_dir)],
            "num_of_worker_buffer_in_pool": 3,
            "embedding_table_names": ["sparse_embedding0"],
            "embedding_vecsize_per_table": [int(meta["embedding_dim"])],
            "maxnum_catfeature_query_per_table_per_sample": [tables],
            "default_value_for_each_table": [1.0],
            "deployed_device_list": [0],
            "max_batch_size": run["model"]["triton"]["max_batch_size"],
            "cache_refresh_percentage_per_iteration": 0.0,
            "hit_rate_threshold": 1.0,
            "gpucacheper": float(settings(run["model"])["cache_fraction"]),
            "gpucache": True,
        }],
    }


def hps_repository(run: dict, sparse_dir: Path, meta: dict, repo: Path,
                   name: str) -> list[tuple[str, dict, dict]]:
    """The HPS sparse model (config.pbtxt, sparse.json, HPS's `key` + `emb_vector` files
    of the fused table) and the python step that makes its keys; returns the ensemble
    steps of both. Written, not run, here (no HPS backend on these machines): per sample,
    KEYS [T] are the ids with the fused table's offsets and NUMKEYS [1] is T, where DLE's
    client sends a whole batch as one sample."""
    version = repo / name / "1"
    embedding_dir = version / "embeddings"
    embedding_dir.mkdir(parents=True)
    storage = np.load(sparse_dir / STORAGE, mmap_mode="r")
    with open(embedding_dir / "emb_vector", "wb") as f:  # HPS reads raw float32 rows
        for start in range(0, len(storage), 1 << 20):
            f.write(np.ascontiguousarray(storage[start:start + (1 << 20)]).tobytes())
    np.arange(len(storage), dtype=np.int64).tofile(embedding_dir / "key")
    (repo / name / "sparse.json").write_text(
        json.dumps(hps_json(name, embedding_dir.resolve(), meta, run), indent=2))
    tables = len(meta["table_sizes"])
    hps = mc.ModelConfig(
        name=name, backend=HPS_BACKEND, max_batch_size=run["model"]["triton"]["max_batch_size"],
        input=[mc.ModelInput(name=HPS_KEYS, data_type=mc.TYPE_INT64, dims=[-1]),
               mc.ModelInput(name=HPS_NUMKEYS, data_type=mc.TYPE_INT32, dims=[-1])],
        output=[mc.ModelOutput(name=HPS_OUTPUT, data_type=mc.TYPE_FP32, dims=[-1])],
        instance_group=instance_groups(run))
    write_config(hps, version.parent / "config.pbtxt")

    keys = f"{name}-keys"
    keys_version = repo / keys / "1"
    keys_version.mkdir(parents=True)
    shutil.copyfile(KEYS_MODEL, keys_version / "model.py")
    model = run["model"]
    sparse_input = settings(model)["sparse_input"]
    keys_config = mc.ModelConfig(
        name=keys, backend="python", max_batch_size=model["triton"]["max_batch_size"],
        input=[tensor(mc.ModelInput, model["inputs"][sparse_index(model)])],
        output=[mc.ModelOutput(name=HPS_KEYS, data_type=mc.TYPE_INT64, dims=[tables]),
                mc.ModelOutput(name=HPS_NUMKEYS, data_type=mc.TYPE_INT32, dims=[1])],
        instance_group=[mc.ModelInstanceGroup(count=1, kind=mc.ModelInstanceGroup.KIND_CPU)])
    keys_config.parameters["table_sizes"].string_value = json.dumps(meta["table_sizes"])
    write_config(keys_config, keys_version.parent / "config.pbtxt")
    lookup = lookup_tensor(model, meta)["name"]
    return [(keys, {sparse_input: sparse_input},
             {HPS_KEYS: "HPS_KEYS", HPS_NUMKEYS: "HPS_NUMKEYS"}),
            (name, {HPS_KEYS: "HPS_KEYS", HPS_NUMKEYS: "HPS_NUMKEYS"}, {HPS_OUTPUT: lookup})]


# ---- hit-rate counters ---------------------------------------------------------------

_METRIC = re.compile(r'^deploybench_embedding_(lookups|cache_hits)_total\{([^}]*)\}\s+(\S+)',
                     re.M)


def cache_counters(metrics_text: str) -> dict | None:
    """Lookups and cache hits per table from Triton's metrics (Prometheus text), with
    the hit rate; None when the server exports none (no python sparse model)."""
    per_table: dict[int, dict[str, int]] = {}
    for kind, labels, value in _METRIC.findall(metrics_text):
        table = int(dict(re.findall(r'(\w+)="([^"]*)"', labels))["table"])
        per_table.setdefault(table, {"lookups": 0, "cache_hits": 0})[kind] = int(float(value))
    if not per_table:
        return None
    lookups = sum(t["lookups"] for t in per_table.values())
    hits = sum(t["cache_hits"] for t in per_table.values())
    tables = [per_table[i] for i in sorted(per_table)]
    return {"lookups": lookups, "cache_hits": hits,
            "hit_rate": hits / lookups if lookups else None,
            "per_table_hit_rate": [t["cache_hits"] / t["lookups"] if t["lookups"] else None
                                   for t in tables]}
