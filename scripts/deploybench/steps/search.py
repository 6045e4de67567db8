"""The configuration search (deploybench.search): one point measured, and the search's
report.

A point is measured as a configuration is (the offline and online sweeps of
deploybench.sweeps.closed_loop, on the point's own model repository), but a point that fails (Triton
refuses to load it, perf_analyzer finds no stable measurement, the server dies) does not
fail its job: its `point.json` records `failed` and the reason, no CSV is left beside it,
and the search goes on with the other points (Model Analyzer stops its search there).
"""

from __future__ import annotations

import queue
import shutil
import traceback
from pathlib import Path

import pandas as pd
from tritonclient.utils import InferenceServerException

from .. import search as configuration_search
from ..records import atomic, formats
from ..records.tables import STABLE, THROUGHPUT, read_perf
from ..reporting.plots import frontier_plot
from ..reporting.search_report import search_page
from ..sweeps import closed_loop
from ..triton import config as triton_config
from ..triton import repository as triton_repository
from ..triton.perf_failures import PerfError
from ..triton.server import ServerError

P99 = "p99 latency (ms)"
AVERAGE = "avg latency (ms)"
# What a point's own values can cause, recorded as its failure while the search goes on:
# Triton refuses or cannot load it or dies (ServerError), it fails or does not answer the
# warm-up's requests (InferenceServerException, queue.Empty), perf_analyzer finds no stable
# measurement (PerfError). Anything else (a missing server, a failed accuracy, a bug) would
# fail every point alike: it fails the job.
POINT_FAILURES = (ServerError, PerfError, InferenceServerException, queue.Empty)
# the longest reason a point.json keeps (the server's log tail or perf_analyzer's message)
REASON_CHARS = 3000


def search_point(spec: dict, repository: Path, perf_data: Path, accuracy: Path, out: Path,
                 config: Path, offline_perf_log: Path, offline_server_log: Path,
                 online_perf_log: Path, online_server_log: Path) -> None:
    """Measure one point in its scenarios (online, then offline unless the search leaves
    it out); `out` (point.json) says whether it was measured (status ok, each scenario's
    rows, beside online.csv and offline.csv) or failed (status failed, the scenario and
    the reason; no CSV). `config`: the config.pbtxt it served, kept beside them, so that a
    point's folder says what it measured without its repository (which holds the model)."""
    folder = out.parent
    point = spec["search_point"]
    served = triton_repository.config_path(repository, spec["key"]["model"])
    triton_config.read(served)  # parses as Triton's ModelConfig
    with atomic.output(config) as tmp:
        shutil.copyfile(served, tmp)
    files = {s: (folder / f"{s}.csv", folder / f"{s}.json")
             for s in configuration_search.SCENARIOS}
    _remove(files)  # an earlier measurement of this point is no result of this one
    logs = {"offline": (offline_perf_log, offline_server_log),
            "online": (online_perf_log, online_server_log)}
    result = {"point": point["name"], "values": point["values"],
              "triton": spec["model"]["triton"], "status": configuration_search.OK}
    scenario = None
    try:
        for scenario in point["scenarios"]:
            measure = getattr(closed_loop, scenario)
            measure(spec, repository, perf_data, accuracy, *files[scenario], *logs[scenario])
    except Exception as err:
        _remove(files)  # no table of a point whose measurement did not finish
        if not isinstance(err, POINT_FAILURES):
            raise  # it would fail every point alike
        traceback.print_exc()  # recorded: the search goes on with the other points
        reason = f"{scenario}: {err}"
        if len(reason) > REASON_CHARS:
            reason = reason[:REASON_CHARS // 3] + "\n[...]\n" + reason[-2 * REASON_CHARS // 3:]
        result |= {"status": configuration_search.FAILED, "scenario": scenario,
                   "reason": reason}
        print(f"search point {point['name']}: failed ({scenario}): {err}")
    else:
        result |= {s: point_rows(read_perf(files[s][0])) for s in point["scenarios"]}
        print(f"search point {point['name']}: measured")
    with atomic.output(out) as tmp:
        tmp.write_text(formats.text(result))


def _remove(files: dict) -> None:
    for pair in files.values():
        for path in pair:
            path.unlink(missing_ok=True)


def point_rows(table: pd.DataFrame) -> list[dict]:
    """A scenario's levels (its CSV, read_perf) as point.json keeps them."""
    return [{"batch": int(r["Batch"]), "concurrency": int(r["Concurrency"]),
             "shared_memory": r["Shared memory"], "throughput": float(r[THROUGHPUT]),
             "p99_ms": float(r[P99]), "avg_ms": float(r[AVERAGE]),
             "stable": bool(r[STABLE])}  # False: kept by perf.on_unstable: record
            for _, r in table.iterrows()]


def search_report(spec: dict, points: list[Path], configs: list[Path], out: Path,
                  out_json: Path, winner: Path, frontier: Path) -> None:
    """The search's README: every point measured (values, status, online peak and its p99,
    best level within the budget), the frontier, the best point within the budget and the
    best overall, and the winner's config.pbtxt (as `winner`, linked)."""
    search, key = spec["search"], spec["key"]
    budget, rank = search.get("p99_budget_ms"), search["rank"]
    # the points in the order the strategy measured them (the rule's input)
    results = {Path(p).parent.name: formats.read(Path(p)) for p in points}
    spec = {**spec, "points": list(results)}
    measured = {n: r for n, r in results.items() if r["status"] == configuration_search.OK}
    if not measured:
        raise ValueError("no point of the search was measured (every one failed; see "
                         f"{out.parent}/<point>/point.json): nothing to deploy")
    within = configuration_search.best(results, budget, rank)
    fastest = configuration_search.best(results, None)
    chosen = within or fastest
    config_pbtxt = {Path(c).parent.name: Path(c) for c in configs}[chosen]
    with atomic.output(winner) as tmp:
        shutil.copyfile(config_pbtxt, tmp)
    lines = [(key["gpu"], n, False, pd.DataFrame(
        [{THROUGHPUT: r["throughput"], P99: r["p99_ms"], AVERAGE: r["avg_ms"]}
         for r in measured[n]["online"]])) for n in sorted(measured)]
    title = f"{key['model']} {key['gpu']} {key['backend']}_{key['precision']}: search"
    frontier_plot(lines, "online", title, frontier, budget_ms=budget)
    summary = {
        "key": key, "strategy": search["strategy"], "p99_budget_ms": budget, "rank": rank,
        "descent_passes": search.get("descent_passes", 1),
        "dimensions": configuration_search.lists(search), "reference": spec["reference"],
        "points": spec["points"], "grid": spec["grid"],
        "best_within_budget": within, "best_overall": fastest, "winner": chosen,
        "results": results,
    }
    with atomic.output(out_json) as tmp:
        tmp.write_text(formats.text(summary))
    text = search_page(spec, results, within, fastest, chosen, winner, out.parent, frontier)
    with atomic.output(out) as tmp:
        tmp.write_text(text)
