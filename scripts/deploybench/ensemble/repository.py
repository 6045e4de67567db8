"""An ensemble in a Triton model repository: the ensemble, its sparse and its dense model,
each one request per batch (max_batch_size 0; the interface: ensemble.requests).

    <repo>/<model>/config.pbtxt          platform ensemble: EMB_KEY, EMB_N_KEY, the other inputs
    <repo>/<model>-sparse/1/sparse/      the embedding storage (links), served by the C++
                                         backend's embeddings engine or by
                                         served/sparse_model.py (model.py beside it)
    <repo>/<model>-dense/...             the dense part, as its backend key serves a model
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ..records.files import link_tree
from ..triton import config as triton_config
from ..triton import cpp_backend
from ..triton import repository as triton_repository
from ..triton.config import EMB_KEY, EMB_N_KEY
from . import hps, requests
from .parts import DENSE, SPARSE, dense_run, lookup_tensor, names, read_metadata, store


def served_dense_run(run: dict, meta: dict) -> dict:
    """The dense part's run as the ensemble serves it: its tensors with the batch first,
    max_batch_size 0 (its conversion keeps the batched run: dense_run), the batch it was
    split from kept for the CUDA graphs it may capture (deployments.graph_batch)."""
    served = copy.deepcopy(dense_run(run, meta))
    model = served["model"]
    model["inputs"] = [requests.unbatched(t) for t in model["inputs"]]
    model["outputs"] = [requests.unbatched(t) for t in model["outputs"]]
    model["triton"]["split_from_batch"] = model["triton"]["max_batch_size"]
    model["triton"]["max_batch_size"] = 0
    return served


def create(run: dict, converted: Path, out_config: Path, available: list[str]) -> str:
    """The ensemble, its sparse and its dense model under out_config's repository;
    returns who serves the parts."""
    converted = Path(converted)
    meta = read_metadata(converted / SPARSE)
    drun = served_dense_run(run, meta)
    repo, name = out_config.parent.parent, out_config.parent.name
    part = names(name)
    dense_config = triton_repository.config_path(repo, part[DENSE])
    dense_served = triton_repository.create(drun, converted / DENSE / drun["artifact"],
                                            repo, available, part[DENSE])
    model = run["model"]
    if hps.BACKEND in available:  # the keys go straight to HPS
        sparse_step = hps.create(run, converted / SPARSE, meta, repo, part[SPARSE])
        sparse_served = "Merlin HPS"
    else:
        sparse_served = sparse_server(run, available)
        sparse_step = sparse_model(run, converted / SPARSE, meta, repo, part[SPARSE],
                                   sparse_served)
    dense_in = {t: t for t in triton_config.served_inputs(dense_config)}
    steps = [sparse_step,
             (part[DENSE], dense_in, {t["name"]: t["name"] for t in model["outputs"]})]
    # an ensemble's version folder is empty
    (out_config.parent / triton_repository.VERSION).mkdir(parents=True, exist_ok=True)
    triton_config.write(triton_config.ensemble_config(
        name, requests.inputs(model), requests.outputs(model), steps,
        {requests.TABLE_SIZES: json.dumps(meta["table_sizes"])}), out_config)
    return f"ensemble ({sparse_served} sparse + {dense_served} dense)"


def sparse_server(run: dict, available: list[str]) -> str:
    """Who serves the sparse model: the pipeline's C++ backend (its embedding store in the
    server's process) where the server has it, unless `server.serve_with: python`; else
    the python backend (served/sparse_model.py). A real Merlin HPS is `create`'s choice."""
    choice = run["server"].get("serve_with", "auto")
    if choice != "python" and cpp_backend.NAME in available:
        return cpp_backend.NAME
    if choice == cpp_backend.NAME:
        raise ValueError("server.serve_with is 'deploybench' but the server's backend directory "
                         "has no 'deploybench' backend (the install records why); use "
                         "serve_with: auto or python")
    return "python"


def sparse_model(run: dict, sparse_dir: Path, meta: dict, repo: Path, name: str,
                 server: str) -> tuple[str, dict, dict]:
    """The sparse model `name` over the storage in `sparse_dir` (linked), served by `server`
    (deploybench: runner `embeddings`; python: served/sparse_model.py): the ensemble's keys
    -> the looked-up vectors [B, T x dim]; returns its ensemble step."""
    model = run["model"]
    keys = requests.inputs(model)[:2]
    lookup = requests.unbatched(lookup_tensor(model, meta))
    version = repo / name / triton_repository.VERSION
    if server == "python":
        triton_repository.add_python_model(version, "sparse_model.py")
    version.mkdir(parents=True, exist_ok=True)
    link_tree(sparse_dir, version / SPARSE)
    parameters = {"runner": "embeddings", "artifact": SPARSE,
                  **{k: str(v) for k, v in store(model).items()}}
    triton_config.write(
        triton_config.sparse_config(name, run, keys, lookup, parameters, server),
        triton_repository.config_path(repo, name))
    return name, {EMB_KEY: EMB_KEY, EMB_N_KEY: EMB_N_KEY}, {lookup["name"]: lookup["name"]}
