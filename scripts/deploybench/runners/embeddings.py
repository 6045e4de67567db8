"""Embedding lookups over hierarchical storage: the sparse part of a recommender ensemble,
the deployment shape of Merlin HPS (reference 003).

- host level: every row of every table in one memory-mapped file (`embeddings.npy`,
  float32 [rows, dim], the tables stacked in feature order), so tables larger than RAM
  are paged in by the OS as rows are read;
- device level: where every table fits `device_share` of the device's memory (placement
  `fit`), all of them, a lookup one gather; else (or placement `cache`) a cache of each
  table's most frequently used rows (ranked on the training data, `ranking.npy`),
  `cache_fraction` of its rows (HPS's `gpucacheper`), in the instance's device memory (GPU
  memory on a GPU instance, RAM on a CPU one).
A lookup takes its hits from the device and its misses from the host file: the result is
the full table's row, always. Unlike HPS and the C++ backend's store
(triton_backend/embeddings.cc, the same placement rule), this cache is filled once at load
(no refresh). Ids are reduced modulo their table's size (floor mod), as the single-model
DLRM does.

The python-served sparse model (served/sparse_model.py) and the in-process ensemble runner
both run this code.
"""

from __future__ import annotations

import json
import os
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


PLACEMENTS = ("fit", "cache")


def device_bytes(device: str) -> int:
    """The memory of `device` (cuda:N, or cpu: the host's RAM)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def whole_on_device(placement: str, table_bytes: int, device: str, share: float) -> bool:
    """Whether every table goes to the device whole: placement `fit` and the tables within
    `share` of its memory (the C++ backend's store decides alike)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement '{placement}' is not valid (valid: {', '.join(PLACEMENTS)})")
    return placement == "fit" and table_bytes <= share * device_bytes(device)


def cached_rows(ranking: np.ndarray, sizes: list[int], fraction: float) -> np.ndarray:
    """Global rows of the cache: the first floor(fraction x rows) of each table's ranking."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"cache fraction must be within [0, 1], got {fraction}")
    parts = [np.asarray(ranking[o:o + int(fraction * n)], dtype=np.int64)
             for o, n in zip(table_offsets(sizes), sizes)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class HierarchicalEmbeddings:
    """ids [B, T] (any integer dtype), or the keys of the fused table (lookup_keys) ->
    float32 [B, T * dim], table-major per sample; on a GPU also device tensors in and out
    (lookup_tensor).

    On a GPU the rows on the device and the slot index live in device memory (torch); on
    the CPU both are numpy arrays (`engine` "numpy"): single-threaded gathers, which leave
    the cores to the dense model instead of spinning threads of their own beside it."""

    def __init__(self, sparse_dir, cache_fraction: float, device: str = "cpu",
                 engine: str | None = None, placement: str = "fit",
                 device_share: float = 0.5):
        sparse_dir = Path(sparse_dir)
        meta = json.loads((sparse_dir / METADATA).read_text())
        self.sizes = np.asarray(meta["table_sizes"], dtype=np.int64)
        self.dim = int(meta["embedding_dim"])
        self.storage = np.load(sparse_dir / STORAGE, mmap_mode="r")
        if self.storage.shape != (int(self.sizes.sum()), self.dim):
            raise ValueError(f"{sparse_dir / STORAGE} holds {self.storage.shape}, "
                             f"{METADATA} says {int(self.sizes.sum())} rows of {self.dim}")
        if not 0.0 <= cache_fraction <= 1.0:
            raise ValueError(f"cache fraction must be within [0, 1], got {cache_fraction}")
        self.whole = whole_on_device(placement, self.storage.nbytes, device, device_share)
        self.cache_fraction = 1.0 if self.whole else float(cache_fraction)
        if self.whole:  # every row, in row order: a row's slot is the row
            rows, slot_of = np.arange(len(self.storage)), None
        else:  # sorted: the cache is filled by one sequential pass over the file
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
            slot_of = None if slot_of is None else torch.from_numpy(slot_of).to(device)
            cache = torch.from_numpy(cache).to(device)
        self.slot_of, self.cache = slot_of, cache
        self.lookups = np.zeros(len(self.sizes), dtype=np.int64)
        self.hits = np.zeros(len(self.sizes), dtype=np.int64)

    def describe(self) -> dict:
        return {"tables": len(self.sizes), "rows": int(self.sizes.sum()),
                "embedding_dim": self.dim, "whole_on_device": self.whole,
                "cache_fraction": self.cache_fraction, "cached_rows": len(self.cache),
                "cache_bytes": int(self.cache.nbytes),
                "storage_bytes": int(self.storage.nbytes), "device": str(self.device)}

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        return self.lookup_keys(fused_keys(ids, self.sizes))

    def _checked(self, count: int, low: int, high: int) -> int:
        """The batch of `count` keys whose least and greatest are low and high."""
        tables = len(self.sizes)
        if count % tables:
            raise ValueError(f"{count} keys are not a whole number of samples of "
                             f"{tables} tables")
        if count and (low < 0 or high >= len(self.storage)):
            raise ValueError(f"keys outside the fused table's {len(self.storage)} rows "
                             f"(min {low}, max {high})")
        return count // tables

    def _count(self, batch: int, hits_per_table) -> None:
        self.lookups += batch
        self.hits += hits_per_table

    def lookup_keys(self, keys: np.ndarray) -> np.ndarray:
        """keys (rows of the stacked tables, sample by sample, each sample's T keys table
        by table: the ensemble's EMB_KEY) -> float32 [B, T * dim]."""
        rows = np.asarray(keys).astype(np.int64, copy=False).reshape(-1)
        if self.engine == "torch":
            return self.lookup_tensor(self.torch.from_numpy(rows)).cpu().numpy()
        batch = self._checked(len(rows), *((rows.min(), rows.max()) if len(rows) else (0, 0)))
        if self.whole:
            self._count(batch, batch)
            return self.cache[rows].reshape(batch, -1)
        slots = self.slot_of[rows]
        hit = slots >= 0
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        out[hit] = self.cache[slots[hit]]
        if not hit.all():
            out[~hit] = self.storage[rows[~hit]]
        self._count(batch, hit.reshape(batch, -1).sum(axis=0))
        return out.reshape(batch, -1)

    def lookup_tensor(self, keys):
        """keys as a torch tensor (any device) -> float32 [B, T * dim] on the device: hits
        gathered there, misses read on the host and copied over."""
        torch = self.torch
        keys = keys.to(self.device, torch.int64, non_blocking=True).reshape(-1)
        if len(keys) and bool(((keys < 0) | (keys >= len(self.storage))).any()):
            self._checked(len(keys), int(keys.min()), int(keys.max()))
        batch = self._checked(len(keys), 0, 0)
        if self.whole:
            self._count(batch, batch)
            return self.cache.index_select(0, keys).view(batch, -1)
        slots = self.slot_of.index_select(0, keys)
        hit = slots >= 0
        out = (self.cache.index_select(0, slots.clamp(min=0).long()) if len(self.cache)
               else torch.empty((len(keys), self.dim), device=self.device))
        missed = (~hit).nonzero().squeeze(1)
        if len(missed):
            rows = keys.index_select(0, missed).cpu().numpy()
            out.index_copy_(0, missed, torch.from_numpy(self.storage[rows]).to(self.device))
        self._count(batch, hit.view(batch, -1).sum(0).cpu().numpy())
        return out.view(batch, -1)
