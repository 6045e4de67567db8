"""An ensemble in a Triton model repository: the ensemble, its sparse and its dense model.

    <repo>/<model>/config.pbtxt          platform ensemble: the single model's tensors
    <repo>/<model>-sparse/1/model.py     served/sparse_model.py, beside sparse/ (links)
    <repo>/<model>-dense/...             the dense part, as its backend key serves a model
"""

from __future__ import annotations

from pathlib import Path

from ..files import link_tree
from ..triton import config as triton_config
from ..triton import repository as triton_repository
from . import hps
from .parts import (
    DENSE,
    SPARSE,
    dense_run,
    lookup_tensor,
    names,
    read_metadata,
    settings,
    sparse_index,
)


def create(run: dict, converted: Path, out_config: Path, available: list[str]) -> str:
    """The ensemble, its sparse and its dense model under out_config's repository;
    returns who serves the parts."""
    converted = Path(converted)
    meta = read_metadata(converted / SPARSE)
    drun = dense_run(run, meta)
    repo, name = out_config.parent.parent, out_config.parent.name
    part = names(name)
    dense_config = triton_repository.config_path(repo, part[DENSE])
    dense_served = triton_repository.create(drun, converted / DENSE / drun["artifact"],
                                            repo, available, part[DENSE])
    model = run["model"]
    if hps.BACKEND in available:
        sparse_steps = hps.create(run, converted / SPARSE, meta, repo, part[SPARSE])
        sparse_served = "Merlin HPS"
    else:
        sparse_steps = [sparse_model(run, converted / SPARSE, meta, repo, part[SPARSE])]
        sparse_served = "python"
    dense_in = {t: t for t in triton_config.served_inputs(dense_config)}
    steps = [*sparse_steps,
             (part[DENSE], dense_in, {t["name"]: t["name"] for t in model["outputs"]})]
    # an ensemble's version folder is empty
    (out_config.parent / triton_repository.VERSION).mkdir(parents=True, exist_ok=True)
    triton_config.write(triton_config.ensemble_config(name, run, steps), out_config)
    return f"ensemble ({sparse_served} sparse + {dense_served} dense)"


def sparse_model(run: dict, sparse_dir: Path, meta: dict, repo: Path,
                 name: str) -> tuple[str, dict, dict]:
    """The python-backend sparse model `name` over the storage in `sparse_dir` (linked);
    returns its ensemble step."""
    model = run["model"]
    ids, lookup = model["inputs"][sparse_index(model)], lookup_tensor(model, meta)
    version = repo / name / triton_repository.VERSION
    triton_repository.add_python_model(version, "sparse_model.py")
    link_tree(sparse_dir, version / SPARSE)
    parameters = {"sparse": SPARSE, "cache_fraction": str(settings(model)["cache_fraction"])}
    triton_config.write(triton_config.sparse_config(name, run, ids, lookup, parameters),
                        triton_repository.config_path(repo, name))
    return name, {ids["name"]: ids["name"]}, {lookup["name"]: lookup["name"]}
