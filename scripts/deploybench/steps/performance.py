"""Offline and online performance of a deployment, measured by perf_analyzer on Triton
(deploybench.sweeps.closed_loop), the floor: what Triton costs with an identity model, and
the rate scenario: requests arriving open loop at set rates (deploybench.sweeps.open_loop).

Offline (the references' static batching): concurrency 1 (offline.concurrency), one
perf_analyzer call per batch size, the model loaded without its dynamic batcher. Online:
dynamic batching, one call per concurrency level at the online batch size. Protocol, shared
memory, windows and warm-up as the model's reference document ran them
(deploybench.triton.perf_analyzer).
"""

from __future__ import annotations

from pathlib import Path

from ..sweeps import closed_loop, open_loop


def offline(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
            out_json: Path, perf_log: Path, server_log: Path,
            data: Path | list = ()) -> None:
    """`data`: the dataset an ensemble's requests and cache warm-up are drawn from (none
    for a single model)."""
    closed_loop.offline(spec, repository, perf_data, accuracy, out_csv, out_json, perf_log,
                   server_log, data_dir=data or None)


def online(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
           out_json: Path, perf_log: Path, server_log: Path) -> None:
    closed_loop.online(spec, repository, perf_data, accuracy, out_csv, out_json, perf_log,
                  server_log)


def floor(spec: dict, perf_data: Path, out_csv: Path, out_json: Path, perf_log: Path,
          server_log: Path) -> None:
    """The offline scenario's smallest and largest batch served by an identity model,
    once by each backend of ours the server has (closed_loop.floor)."""
    closed_loop.floor(spec, perf_data, out_csv, out_json, perf_log, server_log)


def rate(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out_csv: Path,
         out_json: Path, perf_log: Path, server_log: Path, online: Path | list = ()) -> None:
    """`online`: the online table the rates are fractions of the peak of (rate.rates_of_peak;
    none otherwise)."""
    open_loop.rate(spec, repository, perf_data, accuracy, out_csv, out_json, perf_log,
                   server_log, online)
