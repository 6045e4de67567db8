"""The sparse part's tables, as the ensemble tests export them."""

import json

import numpy as np

from deploybench.runners.embeddings import (
    METADATA,
    RANKING,
    STORAGE,
)

SIZES = [50, 7, 1000, 1]
DIM = 4


def sparse_dir(path, sizes=SIZES, dim=DIM, seed=0):
    """A sparse export written as the pipeline writes it: random tables, each table's
    rows ranked by a random frequency."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True)
    storage = rng.standard_normal((sum(sizes), dim)).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ranking = np.concatenate([rng.permutation(n) + o for n, o in zip(sizes, offsets)])
    np.save(path / STORAGE, storage)
    np.save(path / RANKING, ranking.astype(np.int64))
    (path / METADATA).write_text(json.dumps({"table_sizes": sizes, "embedding_dim": dim}))
    return storage, offsets, ranking


def full_lookup(storage, offsets, sizes, ids):
    rows = np.mod(ids, sizes) + offsets
    return storage[rows].reshape(len(ids), -1)
