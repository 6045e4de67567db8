"""Benchmark: where a served model's time goes. One configuration's model repository, as
the pipeline built it, served again under variants of its Triton settings, each measured
by perf_analyzer (offline: static batching, concurrency 1) at the given batches and
shared-memory modes; printed as ratios against the configuration as built.

    python scripts/benchmarks/bench_served_variants.py MODEL GPU BACKEND PRECISION \
        [--configfile config/runs/h100.yaml] [--batches 1 1024] [--modes system cuda] \
        [--variant instances=1] [--variant param:FORCE_CPU_ONLY_INPUT_TENSORS=yes] \
        [--variant server:python_shm_default_byte_size=67108864] [--variant env:KEY=VALUE] \
        [--variant backend=python] ...

A variant is one or more comma-separated changes: `instances=N` (the instance count),
`param:KEY=VALUE` (a parameter of config.pbtxt, read by the served model),
`server:KEY=N` (a `triton.server` memory setting of the model config),
`env:KEY=VALUE` (the server's and the python stub's environment), `backend=python` or
`backend=deploybench` (the same artifact served by the other backend of ours). Each
variant's served model profiles its executions (DEPLOYBENCH_PROFILE_EVERY, in both
backends): the table shows the model's own "run" time beside perf_analyzer's latency. It
measures on the real server, so it needs the device of the key and the configuration's
model repository (build it first:
`snakemake results/<model>/<gpu>/<backend>_<precision>/model_repository
    results/<model>/source/perf_data.json`).
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from deploybench.records import layout
from deploybench.records.tables import THROUGHPUT
from deploybench.serving import warmed_server
from deploybench.settings.resolve import settings_of
from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, perf_analyzer
from deploybench.triton import repository as triton_repository
from deploybench.triton.perf_command import Row

ROOT = Path(__file__).resolve().parents[2]

PROFILE_EVERY = 200
PROFILE = re.compile(r"deploybench profile: .*inputs ([\d.]+), run ([\d.]+), outputs ([\d.]+)")


def run_spec(configfiles: list[str], key: tuple[str, str, str, str]) -> dict:
    return settings_of(configfiles, ROOT).run(*key)


def apply(variant: str, config_pbtxt: Path, spec: dict) -> tuple[dict, dict]:
    """Edit the copied config.pbtxt for a variant; returns its environment and its run
    spec."""
    env, spec = {}, copy.deepcopy(spec)
    config = triton_config.read(config_pbtxt)
    for change in filter(None, variant.split(",")):
        name, _, value = change.partition("=")
        if name == "instances":
            for group in config.instance_group:
                group.count = int(value)
        elif name.startswith("param:"):
            config.parameters[name.removeprefix("param:")].string_value = value
        elif name.startswith("env:"):
            env[name.removeprefix("env:")] = value
        elif name.startswith("server:"):
            spec["model"]["triton"].setdefault("server", {})[name.removeprefix("server:")] = \
                int(value)
        elif name == "backend" and value in ("python", cpp_backend.NAME):
            # the same artifact and parameters, served by the other backend of ours
            config.backend = value
            if value == "python":
                triton_repository.add_python_model(
                    config_pbtxt.parent / triton_repository.VERSION, "python_model.py")
        elif name != "as-built":
            raise SystemExit(f"unknown change '{change}' in variant '{variant}'; valid: "
                             "instances=N, param:KEY=VALUE, server:KEY=N, env:KEY=VALUE, "
                             f"backend=python|{cpp_backend.NAME}")
    triton_config.write(config, config_pbtxt)
    return env, spec


def measure(spec: dict, repository: Path, variant: str, rows: list, perf_data: Path,
            scratch: Path) -> list[dict]:
    work = scratch / variant.replace(":", "_").replace(",", "+").replace("=", "-")
    shutil.copytree(repository, work / "repository", symlinks=True)
    config_pbtxt = triton_repository.config_path(work / "repository", spec["key"]["model"])
    env, spec = apply(variant, config_pbtxt, spec)
    env["DEPLOYBENCH_PROFILE_EVERY"] = str(PROFILE_EVERY)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    server_log = work / "server.log"
    served = triton_config.read(config_pbtxt)
    instances, served_by = served.instance_group[0].count, triton_config.served_by(served)
    results = []
    try:
        with open(work / "perf_analyzer.log", "w") as log, \
                warmed_server(spec, "offline", config_pbtxt, rows, perf_data, server_log, work,
                              instances) as (server, _, data_json):
            for row in rows:
                mark = len(server_log.read_text(errors="replace"))
                measured = perf_analyzer.measure(spec, "offline", server, row, data_json,
                                                 work, log)
                runs = [float(m.group(2)) for m in PROFILE.finditer(
                    server_log.read_text(errors="replace")[mark:])]
                results.append({"variant": variant, "batch": row.batch,
                                "mode": row.shared_memory, "served by": served_by,
                                "inf/s": measured[THROUGHPUT],
                                "avg ms": measured["avg latency (ms)"],
                                "server compute ms": measured["Server Compute Infer (ms)"],
                                "model run ms": float(np.median(runs)) if runs else None})
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in ("model", "gpu", "backend", "precision"):
        parser.add_argument(field)
    parser.add_argument("--configfile", action="append", default=[])
    parser.add_argument("--batches", type=int, nargs="+", default=[1])
    parser.add_argument("--modes", nargs="+", default=["system"])
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--directory", type=Path, default=Path.cwd(),
                        help="the pipeline's working directory (default: here)")
    parser.add_argument("--csv", type=Path, help="also write the table there")
    args = parser.parse_args()
    key = (args.model, args.gpu, args.backend, args.precision)
    spec = run_spec(args.configfile, key)
    csv = args.csv.resolve() if args.csv else None
    # in the pipeline's working directory, as its steps: what a measurement writes by the
    # layout's relative paths (the provenance's package list) lands there, not here
    os.chdir(args.directory)
    folder = Path(layout.fill(layout.CONFIGURATION, **spec["key"]))
    repository = folder / "model_repository"
    perf_data = Path(layout.fill(layout.source("perf_data.json"), model=spec["key"]["model"]))
    for needed in (repository, perf_data):
        if not needed.exists():
            raise SystemExit(f"{needed} not found: build it first (see this script's "
                             "docstring)")
    rows = [Row(b, 1, m) for m in args.modes for b in args.batches]
    results = []
    with tempfile.TemporaryDirectory(prefix=".variants-", dir=folder) as scratch:
        for variant in ["as-built", *args.variant]:
            measured = measure(spec, repository, variant, rows, perf_data, Path(scratch))
            print(pd.DataFrame(measured).round(3).to_string(index=False), flush=True)
            results += measured
            keep = Path(os.environ.get("OUT", folder)) / "variants-logs"
            shutil.copytree(scratch, keep, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("repository", "*.csv", "*.json"))
    table = pd.DataFrame(results)
    base = table[table["variant"] == "as-built"].set_index(["batch", "mode"])
    table["latency / as-built"] = [
        row["avg ms"] / base.loc[(row["batch"], row["mode"]), "avg ms"]
        for _, row in table.iterrows()]
    print(" ".join(key))
    print(table.round(3).to_string(index=False))
    if csv:
        table.round(4).to_csv(csv, index=False)


if __name__ == "__main__":
    main()
