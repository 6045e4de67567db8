"""An ensemble's artifacts: the sparse export (once per model), the converted ensemble
(per configuration) and the ensemble run in-process.

    export/sparse/             embeddings.npy (every table's rows, stacked), ranking.npy
                               (each table's rows by frequency), sparse.json
    converted/model.ensemble/  dense/<artifact> (the converted dense part) + sparse/ (links)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import plugins, single
from ..records import atomic
from ..records.files import link_tree
from ..runners.embeddings import METADATA, RANKING, STORAGE, HierarchicalEmbeddings
from ..source import model as source_model
from . import requests
from .parts import (
    DENSE,
    SPARSE,
    dense_run,
    read_metadata,
    settings,
    sparse_index,
    split_model,
    store,
)


def export_sparse(model_settings: dict, weights: Path, data_dir: Path, out: Path) -> None:
    """`out/`: embeddings.npy (every table's rows, stacked), ranking.npy (per table, its
    global rows from most to least frequent in the frequency split; unseen rows last, in
    order) and sparse.json."""
    plugin = plugins.load(model_settings["plugin"])
    ens = settings(model_settings)
    tables, _ = split_model(model_settings, source_model.load(model_settings, weights))
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


def convert(run: dict, dense_exported: Path, sparse_dir: Path, out: Path) -> None:
    """`out/`: the dense export converted as the dense backend key converts a model,
    beside the sparse storage."""
    drun = dense_run(run, read_metadata(sparse_dir))
    with atomic.output(out) as tmp:
        (tmp / DENSE).mkdir(parents=True)
        single.convert(drun, dense_exported, tmp / DENSE / drun["artifact"])
        link_tree(sparse_dir, tmp / SPARSE)


class EnsembleRunner:
    """The ensemble in-process (conversion check, native throughput): a batch of the
    model's samples made into the ensemble's request (ensemble.requests), the sparse
    model's lookups of its keys, then the converted dense part with the same runner as
    its Triton model; list of arrays in the model's input order -> outputs. On a GPU whose
    dense runner takes device tensors, the lookups stay on the device and feed it there
    (run_tensors: the request already on the device, what the native step times apart)."""

    def __init__(self, converted: Path, run: dict):
        converted = Path(converted)
        meta = read_metadata(converted / SPARSE)
        drun = dense_run(run, meta)
        device_id = single.device_id(run["gpu"])
        where = store(run["model"])
        self.sparse = HierarchicalEmbeddings(
            converted / SPARSE, where["cache_fraction"],
            "cpu" if device_id is None else f"cuda:{device_id}", placement=where["placement"],
            device_share=where["device_share"])
        self.dense = single.runner(converted / DENSE / drun["artifact"], drun)
        self.model, self.table_sizes = run["model"], meta["table_sizes"]
        if device_id is not None and hasattr(self.dense, "run_tensors"):
            self.torch, self.device = self.dense.torch, self.dense.device

    def prepare(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """A batch of the model's samples as the ensemble's request (what its clients send)."""
        return requests.flatten(self.model, self.table_sizes, arrays)

    def to_device(self, tensors: list) -> list:
        """The model's inputs (host tensors) as the ensemble's request on the device."""
        request = self.prepare([t.numpy() for t in tensors])
        return [self.torch.from_numpy(a).to(self.device) for a in request]

    def run_tensors(self, request: list) -> list:
        """The request's tensors on the device in, the outputs there out."""
        vectors = self.sparse.lookup_tensor(request[0])
        return self.dense.run_tensors(requests.dense_arrays(self.model, request, vectors))

    def run_request(self, request: list[np.ndarray]) -> list[np.ndarray]:
        """A request's host arrays in (copied to the device where the parts run there), the
        outputs' host arrays out."""
        if hasattr(self, "device"):
            tensors = [self.torch.from_numpy(a).to(self.device) for a in request]
            return [t.cpu().numpy() for t in self.run_tensors(tensors)]
        vectors = self.sparse.lookup_keys(request[0])
        return self.dense(requests.dense_arrays(self.model, request, vectors))

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return self.run_request(self.prepare(arrays))
