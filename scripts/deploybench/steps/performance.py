"""Offline and online performance of a deployment, measured by perf_analyzer on Triton
(deploybench.sweeps), and the floor: what Triton costs with an identity model.

Offline (the references' static batching): concurrency 1 (offline.concurrency), one
perf_analyzer call per batch size, the model loaded without its dynamic batcher. Online:
dynamic batching, one call per concurrency level at the online batch size. Protocol, shared
memory, windows and warm-up as the model's reference document ran them
(deploybench.triton.perf_analyzer).
"""

from __future__ import annotations

from pathlib import Path

from .. import sweeps


def offline(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
            out_json: Path, perf_log: Path, server_log: Path,
            data: Path | list = ()) -> None:
    """`data`: the dataset an ensemble's requests and cache warm-up are drawn from (none
    for a single model)."""
    sweeps.offline(spec, repository, perf_data, accuracy, out_csv, out_json, perf_log,
                   server_log, data_dir=data or None)


def online(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
           out_json: Path, perf_log: Path, server_log: Path) -> None:
    sweeps.online(spec, repository, perf_data, accuracy, out_csv, out_json, perf_log,
                  server_log)


def floor(spec: dict, perf_data: Path, out_csv: Path, out_json: Path, perf_log: Path,
          server_log: Path) -> None:
    """The offline scenario's smallest and largest batch served by an identity model,
    once by each backend of ours the server has (sweeps.floor)."""
    sweeps.floor(spec, perf_data, out_csv, out_json, perf_log, server_log)
