"""Benchmark: what the C++ backend's answer to a failing batch costs where no batch fails
(issue 65: a batch that fails is run again request by request, and every host buffer it
reads in place is watched for a truncated shared-memory region). The same TorchScript model
served by the backend built from this checkout and from another revision (default main),
perf_analyzer at a concurrency that makes the dynamic batcher form batches, every request
good; rounds alternate the two; printed: each run's throughput and p99, and this checkout's
median over the baseline's.

    python scripts/benchmarks/bench_batch_retry.py [--baseline main] [--rounds 3]
        [--concurrency 8] [--requests 3000] [--batch 4]

The baseline's backend is built once (a few minutes) and cached by its commit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

import torch

from deploybench.records.tables import THROUGHPUT
from deploybench.triton import cpp_backend, install, perf_analyzer, repository
from deploybench.triton.perf_command import Row
from deploybench.triton.server import TritonServer

ROOT = Path(__file__).resolve().parents[2]
P99 = "p99 latency (ms)"


def run_spec(requests: int) -> dict:
    return {
        "key": {"model": "bench", "backend": "ts-script"},
        "model": {"inputs": [{"name": "x", "dtype": "FP32", "dims": [64]}],
                  "outputs": [{"name": "y", "dtype": "FP32", "dims": [16]}],
                  "triton": {"max_batch_size": 64, "instances": 1,
                             "preferred_batch_sizes": [64], "max_queue_delay_us": 200},
                  "online": {"measurement_request_count": requests, "protocol": "grpc"}},
        "perf": {"measurement_mode": "count_windows", "measurement_interval_ms": 1000,
                 "stability_percentage": 15, "max_trials": 10, "attempts": 3,
                 "on_unstable": "record"},
        "gpu": {"kind": "cpu"}, "backend": {"runner": "torch", "triton_backend": "pytorch"},
        "precision": "fp32", "artifact": "model.pt", "server": {"serve_with": "auto"},
    }


def baseline_library(revision: str, work: Path) -> Path:
    """The backend library built from `revision`'s triton_backend/ (cached by its commit)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", revision], check=True,
                         capture_output=True, text=True).stdout.strip()
    folder = install.cache_dir() / f"cpp-backend-rev-{sha[:12]}"
    built = folder / "build" / cpp_backend.LIBRARY
    if not built.is_file():
        archive = work / "baseline.tar"
        subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), sha,
                        "triton_backend"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(folder / "src", filter="data")
        print(f"building the backend of {revision} ({sha[:12]}) ...", flush=True)
        cpp_backend.build(cpp_backend._compiler(), folder / "build",
                          sources=folder / "src" / "triton_backend")
    return built


def with_library(prepared: install.Install, library: Path, work: Path) -> install.Install:
    """`prepared` with a backend folder whose deploybench backend is `library`."""
    backends = work / "backends-baseline"
    (backends / cpp_backend.NAME).mkdir(parents=True)
    (backends / "python").symlink_to(prepared.backend_dir / "python")
    (backends / cpp_backend.NAME / cpp_backend.LIBRARY).symlink_to(library)
    return dataclasses.replace(prepared, backend_dir=backends)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=4, help="samples a request")
    args = parser.parse_args()
    current = install.prepare()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        builds = {"this checkout": current,
                  args.baseline: with_library(current, baseline_library(args.baseline, work),
                                              work)}
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 16)).eval()
        torch.jit.script(model).save(str(work / "model.pt"))
        run = run_spec(args.requests)
        repository.create(run, work / "model.pt", work / "repo", current.backends, "bench")
        data = work / "data.json"
        data.write_text(json.dumps({"data": [{"x": {"content": [0.5] * 64, "shape": [64]}}]}))
        row = Row(args.batch, args.concurrency, "none", "bench")
        results: dict[str, list[dict]] = {name: [] for name in builds}
        for round_ in range(args.rounds):
            for name in (list(builds) if round_ % 2 == 0 else list(builds)[::-1]):
                with TritonServer(builds[name], work / "repo", work / "server.log",
                                  "bench") as server, open(work / "perf.log", "a") as log:
                    measured = perf_analyzer.measure(run, "online", server, row, data, work,
                                                     log)
                results[name].append(measured)
                print(f"round {round_ + 1} {name:>14}: {measured[THROUGHPUT]:9.1f} infer/s, "
                      f"p99 {measured[P99]:.3f} ms", flush=True)
    new, old = (results[name] for name in builds)
    for what, key in (("throughput", THROUGHPUT), ("p99 latency", P99)):
        ratio = (statistics.median(m[key] for m in new) /
                 statistics.median(m[key] for m in old))
        print(f"{what}: this checkout / {args.baseline} = {ratio:.3f} (median of "
              f"{args.rounds} runs each)")


if __name__ == "__main__":
    main()
