"""Embedding lookups over hierarchical storage: the sparse part of a recommender ensemble,
the deployment shape of Merlin HPS (reference 003).

- host level: every row of every table in one memory-mapped file (`embeddings.npy`,
  float32 [rows, dim], the tables stacked in feature order), so tables larger than RAM
  are paged in by the OS as rows are read;
- device level: a cache of each table's most frequently used rows (ranked on the
  training data, `ranking.npy`), `cache_fraction` of its rows (HPS's `gpucacheper`), in
  the instance's device memory (GPU memory on a GPU instance, RAM on a CPU one).
A lookup takes its hits from the cache and its misses from the host file: the result is
the full table's row, always. Unlike HPS, the cache is filled once at load (no refresh).
Ids are reduced modulo their table's size (floor mod), as the single-model DLRM does.

The served sparse model (served/sparse_model.py) and the in-process ensemble runner both
run this code.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

METADATA = "sparse.json"
STORAGE = "embeddings.npy"
RANKING = "ranking.npy"


def table_offsets(sizes) -> np.ndarray:
    """Each table's first global row in the stacked storage."""
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def fused_keys(ids, sizes) -> np.ndarray:
    """ids [B, T] (any integer dtype) -> their rows of the fused table, INT64 [B x T]:
    sample by sample, each id modulo its table's size plus the table's first row (floor
    mod: the single-model DLRM takes ids modulo its capped tables the same way)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    ids = np.asarray(ids).astype(np.int64, copy=False)
    if ids.ndim != 2 or ids.shape[1] != len(sizes):
        raise ValueError(f"ids of shape {list(ids.shape)}; expected [batch, {len(sizes)}]")
    return (np.mod(ids, sizes) + table_offsets(sizes)).reshape(-1)


def cached_rows(ranking: np.ndarray, sizes: list[int], fraction: float) -> np.ndarray:
    """Global rows of the cache: the first floor(fraction x rows) of each table's ranking."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"cache fraction must be within [0, 1], got {fraction}")
    parts = [np.asarray(ranking[o:o + int(fraction * n)], dtype=np.int64)
             for o, n in zip(table_offsets(sizes), sizes)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class HierarchicalEmbeddings:
    """ids [B, T] (any integer dtype), or the keys of the fused table (lookup_keys) ->
    float32 [B, T * dim], table-major per sample.

    On a GPU the cache and the slot index live in device memory (torch); on the CPU both
    are numpy arrays (`engine` "numpy"): single-threaded gathers, which leave the cores to
    the dense model instead of spinning threads of their own beside it."""

    def __init__(self, sparse_dir, cache_fraction: float, device: str = "cpu",
                 engine: str | None = None):
        sparse_dir = Path(sparse_dir)
        meta = json.loads((sparse_dir / METADATA).read_text())
        self.sizes = np.asarray(meta["table_sizes"], dtype=np.int64)
        self.dim = int(meta["embedding_dim"])
        self.storage = np.load(sparse_dir / STORAGE, mmap_mode="r")
        if self.storage.shape != (int(self.sizes.sum()), self.dim):
            raise ValueError(f"{sparse_dir / STORAGE} holds {self.storage.shape}, "
                             f"{METADATA} says {int(self.sizes.sum())} rows of {self.dim}")
        # sorted: the cache is filled by one sequential pass over the file
        rows = np.sort(cached_rows(np.load(sparse_dir / RANKING, mmap_mode="r"),
                                   list(self.sizes), cache_fraction))
        slot_of = np.full(len(self.storage), -1, dtype=np.int32)
        slot_of[rows] = np.arange(len(rows), dtype=np.int32)
        cache = np.array(self.storage[rows])
        self.engine = engine or ("numpy" if device == "cpu" else "torch")
        self.device = device
        if self.engine == "torch":
            import torch

            self.torch = torch
            slot_of = torch.from_numpy(slot_of).to(device)
            cache = torch.from_numpy(cache).to(device)
        self.slot_of, self.cache = slot_of, cache
        self.cache_fraction = float(cache_fraction)
        self.lookups = np.zeros(len(self.sizes), dtype=np.int64)
        self.hits = np.zeros(len(self.sizes), dtype=np.int64)

    def describe(self) -> dict:
        return {"tables": len(self.sizes), "rows": int(self.sizes.sum()),
                "embedding_dim": self.dim, "cache_fraction": self.cache_fraction,
                "cached_rows": len(self.cache), "cache_bytes": int(self.cache.nbytes),
                "storage_bytes": int(self.storage.nbytes), "device": str(self.device)}

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        return self.lookup_keys(fused_keys(ids, self.sizes))

    def lookup_keys(self, keys: np.ndarray) -> np.ndarray:
        """keys (rows of the stacked tables, sample by sample, each sample's T keys table
        by table: the ensemble's EMB_KEY) -> float32 [B, T * dim]."""
        rows = np.asarray(keys).astype(np.int64, copy=False).reshape(-1)
        tables = len(self.sizes)
        if len(rows) % tables:
            raise ValueError(f"{len(rows)} keys are not a whole number of samples of "
                             f"{tables} tables")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self.storage)):
            raise ValueError(f"keys outside the fused table's {len(self.storage)} rows "
                             f"(min {rows.min()}, max {rows.max()})")
        if self.engine == "torch":
            out, hit = self._gather_torch(rows)
        else:
            slots = self.slot_of[rows]
            hit = slots >= 0
            out = np.empty((len(rows), self.dim), dtype=np.float32)
            out[hit] = self.cache[slots[hit]]
            if not hit.all():
                out[~hit] = self.storage[rows[~hit]]
        batch = len(rows) // tables
        self.lookups += batch
        self.hits += hit.reshape(batch, tables).sum(axis=0)
        return out.reshape(batch, -1)

    def _gather_torch(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hits gathered on the device, misses read on the host and copied over."""
        torch = self.torch
        slots = self.slot_of[torch.from_numpy(rows).to(self.device)]
        hit = slots >= 0
        out = torch.empty((len(rows), self.dim), dtype=torch.float32, device=self.device)
        out[hit] = self.cache[slots[hit]]
        hit_host = hit.cpu().numpy()
        if not hit_host.all():
            out[~hit] = torch.from_numpy(self.storage[rows[~hit_host]]).to(self.device)
        return out.cpu().numpy(), hit_host
