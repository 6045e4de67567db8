"""Benchmark: the sparse/dense ensemble (backends hps-*) against the single model, its
device-cache hit rates, and a table-size sweep past the cache's memory.

1. served: the pipeline builds (incrementally) the offline scenario of the single model
   and of its ensemble on one GPU key; prints both throughputs per batch size and their
   ratio, with the hit rate the ensemble's sparse model counted.
2. hit rates: the model's sparse export (tables ranked on the training split) looked up
   with the evaluation samples, for the configured cache fraction and 0.01/0.05/0.2/0.5.
3. sweep: synthetic tables of growing size (Criteo-like skewed ids) behind a cache of a
   fixed size, served by the sparse model on a real Triton: samples/s, hit rate and the
   cost relative to tables that fit in the cache; every size is checked against direct
   lookups in the full table.

    python scripts/benchmarks/bench_ensemble.py [--model dlrm] [--gpu cpu] [--single onnx]
        [--ensemble hps-onnx] [--sweep-rows 65536 1048576 ...] [--cache-mb 32]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from deploybench.ensemble import metrics as ensemble_metrics
from deploybench.ensemble import parts as ensemble_parts
from deploybench.ensemble import repository as ensemble_repository
from deploybench.runners.embeddings import (
    METADATA,
    RANKING,
    STORAGE,
    HierarchicalEmbeddings,
    fused_keys,
    table_offsets,
)
from deploybench.settings.resolve import Settings, settings_of
from deploybench.source import model as source_model
from deploybench.tensors import numpy_dtype
from deploybench.triton import install
from deploybench.triton.config import EMB_KEY, EMB_N_KEY
from deploybench.triton.server import TritonServer

ROOT = Path(__file__).resolve().parents[2]

FRACTIONS = [0.01, 0.05, 0.2, 0.5]


def settings(configfiles: list[str]) -> Settings:
    return settings_of(configfiles, ROOT)


def build(targets: list[str], configfiles: list[str]) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(ROOT), "-c2", *targets, "--resources", "bench_slot=1"]
    if configfiles:
        cmd[6:6] = ["--configfile", *configfiles]
    print("building:", " ".join(targets), flush=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)


def served(args, configfiles) -> None:
    import pandas as pd

    runs = {name: ROOT / f"results/{args.model}/{args.gpu}/{backend}_{args.precision}"
            for name, backend in (("single", args.single), ("ensemble", args.ensemble))}
    build([str((run / "offline.csv").relative_to(ROOT)) for run in runs.values()], configfiles)
    single, ens = (pd.read_csv(run / "offline.csv").set_index("Batch")
                   for run in runs.values())
    cache = json.loads((runs["ensemble"] / "offline.json").read_text())["embedding_cache"]
    print(f"\n## Served, offline: {args.model} on {args.gpu}, {args.single} vs "
          f"{args.ensemble} ({args.precision})\n")
    print("| batch | single inf/s | ensemble inf/s | ensemble/single |")
    print("|---:|---:|---:|---:|")
    for batch in single.index.intersection(ens.index):
        a, b = single.loc[batch, "Inferences/Second"], ens.loc[batch, "Inferences/Second"]
        print(f"| {batch} | {a:,.1f} | {b:,.1f} | {b / a:.3f} |")
    print(f"\nensemble's device-cache hit rate over the offline session: "
          f"{cache['hit_rate']:.3f} ({cache['cache_hits']:,} of {cache['lookups']:,} lookups)")


def hit_rates(args, configfiles, config: Settings) -> None:
    model = config.models[args.model]
    sparse = ROOT / f"results/{args.model}/export/sparse"
    eval_npz = ROOT / f"results/{args.model}/source/eval.npz"
    build([str(sparse.relative_to(ROOT)), str(eval_npz.relative_to(ROOT))], configfiles)
    inputs, _, _ = source_model.load_eval(model, eval_npz)
    ids = inputs[ensemble_parts.sparse_index(model)]
    default = float(model["ensemble"]["cache_fraction"])
    print(f"\n## Device-cache hit rate: {args.model}, {len(ids):,} evaluation samples, rows "
          "ranked on the training split\n")
    print("| cache fraction | cached rows | cache MiB | hit rate |")
    print("|---:|---:|---:|---:|")
    for fraction in sorted({default, *FRACTIONS}):
        lookup = HierarchicalEmbeddings(sparse, fraction, placement="cache")
        for start in range(0, len(ids), 4096):
            lookup(ids[start:start + 4096])
        d = lookup.describe()
        mark = " (configured)" if fraction == default else ""
        print(f"| {fraction:g}{mark} | {d['cached_rows']:,} | {d['cache_bytes'] / 2**20:,.1f} | "
              f"{lookup.hits.sum() / lookup.lookups.sum():.3f} |")


def synthetic_sparse(path: Path, rows: int, tables: int, dim: int, rng) -> list[int]:
    """Tables of `rows` rows in all (row r holds r + column/dim: checkable), ranked as a
    skewed id distribution ranks them (low ids most frequent)."""
    sizes = [rows // tables] * tables
    path.mkdir(parents=True)
    storage = np.lib.format.open_memmap(path / STORAGE, "w+", np.float32, (sum(sizes), dim))
    column = np.arange(dim, dtype=np.float32) / dim
    for start in range(0, len(storage), 1 << 18):
        stop = min(start + (1 << 18), len(storage))
        storage[start:stop] = np.arange(start, stop, dtype=np.float32)[:, None] + column
    storage.flush()
    np.save(path / RANKING, np.arange(sum(sizes), dtype=np.int64))  # id order = frequency
    (path / METADATA).write_text(json.dumps({"table_sizes": sizes, "embedding_dim": dim}))
    return sizes


def serve_sparse(triton, tmp: Path, ens: dict, ids: np.ndarray, sizes: list[int],
                 dim: int) -> tuple[float, dict]:
    """Samples/s of the sparse model on a real Triton over `ids` [requests, batch, tables]
    (the first request checked against the table and left out of the timing), each batch
    sent as the ensemble sends it (its fused-table keys), and its cache counters."""
    import tritonclient.grpc as grpcclient

    with TritonServer(triton, tmp / "repo", tmp / "server.log", "sparse") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)

        def infer(request_ids):
            keys = fused_keys(request_ids, sizes)
            tensors = [grpcclient.InferInput(EMB_KEY, [len(keys)], "INT64"),
                       grpcclient.InferInput(EMB_N_KEY, [1], "INT32")]
            tensors[0].set_data_from_numpy(keys)
            tensors[1].set_data_from_numpy(np.array([len(keys)], dtype=np.int32))
            return client.infer("sparse", tensors).as_numpy(ens["lookup"])

        offsets = table_offsets(sizes)
        batch, tables = ids.shape[1:]
        got = infer(ids[0]).reshape(batch, tables, dim)
        want = (ids[0] % sizes + offsets)[..., None] + np.arange(dim) / dim
        if not np.array_equal(got, want.astype(np.float32)):
            sys.exit(f"{sum(sizes)} rows: lookups through Triton differ from the table")
        start = time.perf_counter()
        for request_ids in ids[1:]:
            infer(request_ids)
        rate = batch * (len(ids) - 1) / (time.perf_counter() - start)
        return rate, ensemble_metrics.cache_counters(server.metrics())


def sweep(args, config: Settings) -> None:
    run = copy.deepcopy(config.run(args.model, "cpu", "hps-onnx", "fp32"))  # edited below
    model = run["model"]
    tables = len(model["hparams"].get("cardinalities", [])) or 26
    dim = int(model["hparams"]["embedding_dim"])
    ids_spec = model["inputs"][ensemble_parts.sparse_index(model)]
    cache_rows = args.cache_mb * 2**20 // (dim * 4)
    batch, requests = args.sweep_batch, args.sweep_requests
    rng = np.random.default_rng(0)
    triton = install.prepare()
    server = ensemble_repository.sparse_server(run, triton.backends)
    print(f"\n## Table-size sweep: {tables} tables x {dim} FP32, device cache "
          f"{args.cache_mb} MiB, Triton sparse model ({run['gpu']['key']}, served by {server}), "
          f"batch {batch}\n")
    print("| rows | tables MiB | tables/cache | cache fraction | hit rate | samples/s | "
          "cost vs first |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    first = None
    for rows in args.sweep_rows:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            tmp = Path(tmp)
            sizes = synthetic_sparse(tmp / "sparse", rows, tables, dim, rng)
            fraction = min(1.0, cache_rows / sum(sizes))
            meta = ensemble_parts.read_metadata(tmp / "sparse")
            run["model"]["ensemble"] = {**model["ensemble"], "cache_fraction": fraction,
                                        "placement": "cache"}  # the store past the device
            ensemble_repository.sparse_model(run, tmp / "sparse", meta, tmp / "repo", "sparse",
                                             server)
            # Criteo-like skew: id = size x u^3 (a tenth of the rows take ~46% of lookups)
            ids = np.floor(np.asarray(sizes) * rng.random((requests, batch, tables)) ** 3)
            ids = ids.astype(numpy_dtype(ids_spec["dtype"]))  # the model's id type
            rate, cache = serve_sparse(triton, tmp, model["ensemble"], ids, sizes, dim)
        first = first or rate
        mib = sum(sizes) * dim * 4 / 2**20
        print(f"| {sum(sizes):,} | {mib:,.0f} | {mib / args.cache_mb:.2f} | {fraction:.4f} | "
              f"{cache['hit_rate']:.3f} | {rate:,.0f} | {first / rate:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="dlrm")
    parser.add_argument("--gpu", default="cpu")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--single", default="onnx")
    parser.add_argument("--ensemble", default="hps-onnx")
    parser.add_argument("--configfile", nargs="*", default=[])
    parser.add_argument("--parts", nargs="*", default=["served", "hit-rates", "sweep"],
                        choices=["served", "hit-rates", "sweep"])
    parser.add_argument("--cache-mb", type=int, default=32)
    parser.add_argument("--sweep-rows", type=int, nargs="*",
                        default=[2**16, 2**18, 2**20, 2**22])
    parser.add_argument("--sweep-batch", type=int, default=1024)
    parser.add_argument("--sweep-requests", type=int, default=50)
    parser.add_argument("--workdir", default=None, help="where the sweep's tables go")
    args = parser.parse_args()
    config = settings(args.configfile)
    if "served" in args.parts:
        served(args, args.configfile)
    if "hit-rates" in args.parts:
        hit_rates(args, args.configfile, config)
    if "sweep" in args.parts:
        sweep(args, config)


if __name__ == "__main__":
    main()
