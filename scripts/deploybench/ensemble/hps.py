"""A real Merlin HPS backend as an ensemble's sparse model (where the server has `hps`).

HPS's parameter-server config (the keys of DLE's deployment/hps/deploy_sparse.py) and its
`key` and `emb_vector` files of the fused table. The ensemble's EMB_KEY and EMB_N_KEY
(ensemble.requests) are HPS's KEYS and NUMKEYS as they are: no step between them. Written,
not run, here: no HPS backend on these machines.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..runners.embeddings import STORAGE
from ..triton import config as triton_config
from ..triton import repository as triton_repository
from ..triton.config import EMB_KEY, EMB_N_KEY, HPS_KEYS, HPS_NUMKEYS, HPS_OUTPUT
from ..triton.server import HPS_PS_CONFIG
from .parts import lookup_tensor, settings

BACKEND = "hps"


def ps_config(model_name: str, embedding_dir: Path, meta: dict, run: dict) -> dict:
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


def create(run: dict, sparse_dir: Path, meta: dict, repo: Path,
           name: str) -> tuple[str, dict, dict]:
    """The HPS sparse model (config.pbtxt, its parameter-server config, HPS's `key` +
    `emb_vector` files of the fused table); returns its ensemble step."""
    version = repo / name / triton_repository.VERSION
    embedding_dir = version / "embeddings"
    embedding_dir.mkdir(parents=True)
    storage = np.load(sparse_dir / STORAGE, mmap_mode="r")
    with open(embedding_dir / "emb_vector", "wb") as f:  # HPS reads raw float32 rows
        for start in range(0, len(storage), 1 << 20):
            f.write(np.ascontiguousarray(storage[start:start + (1 << 20)]).tobytes())
    np.arange(len(storage), dtype=np.int64).tofile(embedding_dir / "key")
    (repo / name / HPS_PS_CONFIG).write_text(
        json.dumps(ps_config(name, embedding_dir.resolve(), meta, run), indent=2))
    triton_config.write(triton_config.hps_config(name, run),
                        triton_repository.config_path(repo, name))
    lookup = lookup_tensor(run["model"], meta)["name"]
    return name, {HPS_KEYS: EMB_KEY, HPS_NUMKEYS: EMB_N_KEY}, {HPS_OUTPUT: lookup}
