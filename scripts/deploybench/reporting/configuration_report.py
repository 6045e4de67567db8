"""A configuration's README in the reference documents' format: its headline first
(reporting.headline), then its settings, tables, plots and provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..backends import export_precision
from ..records import formats, tail
from ..records.tables import (
    measured_columns,
    read_perf,
)
from ..settings.deployments import gpu_count
from ..settings.run_facts import online_refusal, serves_online
from ..settings.scenarios import step_refusal
from ..settings.step_specs import store_settings
from .conditions import host_load_section, noise_section, telemetry_section, unstable_note
from .headline import configuration_headline, configuration_lines, served_by
from .markdown import (
    PERF_ANALYZER_STABILITY,
    batches_formed,
    markdown_table,
    shared_memory,
    warm_up,
    windows,
)
from .rate import rate_section
from .served_native import served_vs_native_table

# The sections of a configuration's README that read more than one table: the ensemble's
# embedding cache, served against native, the identity model's floor
CACHE_SECTION = """## Embedding cache (sparse model)

Lookups of every table over the server's session (warm-up included), the share served from
device memory. {placement}

{table}

"""
NATIVE_SECTION = """\
The same converted model, runner, batch sizes and precision in-process on the same
device (`native.csv`), against the offline scenario through Triton: system shared memory
against the runner with host arrays in and out, CUDA shared memory against it with the
tensors already on the device (its compute limit).

{ratio}

{table}

First call of each batch size in-process (a compile, a CUDA graph's capture), seconds:
{first_calls}"""
FLOOR_SECTION = """\
The same server, scenario and data path with a model that returns zeros at no cost
(`floor.csv`), served once by each backend of ours the server has (`Served by`: python, its
stub process; deploybench, the pipeline's C++ backend): what Triton and each of them cost by
themselves, apart from the model's compute.

{note}{table}"""


# A scenario the configuration has whose files are not in its folder: measured by a run of
# its own (a lent machine too short for all of them, scripts/machines/gpu_lanes.sh) and not
# yet put beside the others (scripts/results_tools/assemble_configuration.py builds the
# page from what is there)
APART = ("measured by a run of its own, whose files are not in this folder yet "
         "(`scripts/results_tools/assemble_configuration.py` builds this page again once "
         "they are)")


# Why a user's Triton repository has no conversion check
AS_IS = ("a Triton model repository is served as it is, by the backend its config.pbtxt "
         "names: nothing is converted")


def _not_here(refusal: str | None) -> str:
    """Why a scenario's section is empty: the configuration has none, or its run is apart."""
    return f"Not measured: {refusal}." if refusal else f"Not in this folder: {APART}."


def _params_table(rows: list[tuple[str, object]]) -> str:
    return "\n".join(["| Parameter Name | Parameter Value |", "|:---|:---|",
                      *[f"| {k} | {v} |" for k, v in rows]])


def _cache_section(run: dict, offline: dict, online: dict) -> str:
    """The sparse model's device-cache counters of an ensemble (empty otherwise)."""
    rows = [{"scenario": name, **{k: report["embedding_cache"][k]
                                  for k in ("lookups", "cache_hits", "hit_rate")}}
            for name, report in (("offline", offline), ("online", online))
            if report.get("embedding_cache")]
    if not rows:
        return ""
    store = store_settings(run["model"]["ensemble"])
    cache = (f"a cache of {store['cache_fraction']:g} of each table's rows (HPS's "
             "`gpucacheper`), filled with each table's most frequent rows in the training "
             "split (and refreshed with missed rows as it serves, in the C++ backend's store); "
             "misses read the memory-mapped host storage")
    placement = (f"Every table is on the device where all of them fit {store['device_share']:g} "
                 f"of its memory (every lookup a hit), else {cache}." if store["placement"] == "fit"
                 else f"Placement `cache`: {cache}.")
    return CACHE_SECTION.format(placement=placement, table=markdown_table(pd.DataFrame(rows)))


def _online_section(run: dict, files: dict, rel: dict) -> str:
    """The online scenario's table and plot, or why the configuration has none."""
    if "online" not in files:
        return _not_here(online_refusal(run))
    triton = run["model"]["triton"]
    return (f"Dynamic batching (preferred batch sizes {triton['preferred_batch_sizes']}, max "
            f"queue\ndelay {triton['max_queue_delay_us']} µs), HTTP, batch "
            f"{run['model']['online']['batch_size']}.\n\n"
            f"![Latency vs concurrency]({rel['online_latency']})\n\n"
            + unstable_note(read_perf(files["online"]), run["perf"])
            + markdown_table(measured_columns(read_perf(files["online"])))
            + _tail(formats.read(Path(files["online_json"])), rel.get("online_tail")))


def _tail(report: dict, plot: str | None) -> str:
    """Every request's percentiles of each level (deploybench.records.tail) and the batches
    Triton formed, where measured."""
    text = ""
    if report.get("tail"):
        text += ("\n\nEvery request's latency of the windows perf_analyzer kept (its profile "
                 f"export), with 95 % intervals ({tail.UNBOUNDED}: too few requests above the "
                 "percentile to bound it):\n\n"
                 + markdown_table(tail.table(report["tail"], ("Concurrency",))))
    if report.get("tail_not_taken"):
        untaken = report["tail_not_taken"]
        text += (f"\n\nNo per-request latencies (the tail's percentiles) at concurrency "
                 f"{', '.join(str(u['Concurrency']) for u in untaken)}: {untaken[0]['why']}.")
    if report.get("batches_formed"):
        text += ("\n\nExecutions by the batch size Triton's dynamic batcher formed at each "
                 "level (its statistics over the level's run):\n\n"
                 + batches_formed(report["batches_formed"], "Concurrency", "Concurrency"))
    if text and plot:
        text += f"\n\n![Latency distribution and batches formed]({plot})"
    return text


def _native_section(run: dict, files: dict, native_json: Path | list) -> str:
    """Served against native on the same device, or why there is no native figure."""
    if "native" not in files:
        return _not_here(step_refusal(run, "native"))
    return NATIVE_SECTION.format(
        ratio=served_vs_native_table(files["offline"], files["native"]),
        table=markdown_table(measured_columns(pd.read_csv(files["native"]))),
        first_calls=_first_calls(native_json))


def _floor_section(run: dict, floor: Path | list) -> str:
    """What an identity model costs on the same server, or why it was not measured."""
    if not floor:
        return _not_here(step_refusal(run, "floor"))
    table = read_perf(floor)
    return FLOOR_SECTION.format(note=unstable_note(table, run["perf"]),
                                table=markdown_table(measured_columns(table)))


def _perf_settings(ran: dict) -> str:
    """How perf_analyzer measured a scenario, from what its JSON recorded."""
    warm = warm_up(ran)
    return (f"{ran['protocol'].upper()}, shared memory {shared_memory(ran)}, {windows(ran)}, "
            + (f"warm-up of {warm}" if warm != "none" else "no warm-up run"))


def _deployments(offline_report: dict, online_report: dict) -> str:
    """The Triton model (and its max batch size) that measured each offline batch and the
    online sweep (offline.json and online.json; earlier ones did not record it)."""
    def named(row):
        return f"`{row['model']}` (max batch {row['max_batch_size']})"

    offline = {row["Batch"]: named(row) for row in offline_report.get("deployments", [])}
    online = [named(row) for row in online_report.get("deployments", [])[:1]]
    parts = [f"batch {batch}: {name}" for batch, name in offline.items()]
    parts += [f"online: {name}" for name in online]
    return "; ".join(parts) or "not recorded"


# One configuration's README: its sections filled in by configuration_report
PAGE = """# {title}

{headline}

Built by the deploybench pipeline: export → conversion → conversion check → Triton model
repository → accuracy on Triton → offline and online performance (perf_analyzer).

## Configuration

{params}

## Conversion check (converted vs source model)

{check}

## Accuracy on Triton

{accuracy}

## Offline scenario

Static batching, the `Concurrency` column's requests in flight (the references': 1),
perf_analyzer as the configuration says; the `Shared memory` column: system or none (in the
requests), as the references; cuda, in GPU memory, which a torch runner takes without a
host copy. `avg latency (ms)` is perf_analyzer's,
`sum of components (ms)` the references' "avg latency".

![Throughput vs batch]({offline_throughput})
![Latency vs batch]({offline_latency})

{offline}

## Serving overhead: Triton vs native

{native}

## Triton's own cost: an identity model

{floor}

{cache}## Online scenario

{online}

{rate}{noise}## Host load

{host_load}

## Telemetry

{telemetry}

## Provenance

```json
{provenance}
```
"""


def _params(run: dict, files: dict, offline_report: dict, online_report: dict) -> str:
    """The configuration table: what ran, on what, measured how."""
    model, key, prov = run["model"], run["key"], offline_report["provenance"]
    devices = ", ".join(prov.get("device_check", {}).get("devices", [])) or "CPU"
    return _params_table([
        ("GPU key", key["gpu"]),
        ("Device", devices + (" (GPU key check overridden)"
                              if prov.get("device_check", {}).get("mismatch_allowed") else "")),
        ("Backend", run["backend"]["title"]),
        ("Precision", run["precision"].upper()),
        ("Model format", key["backend"]),
        ("Max batch size", model["triton"]["max_batch_size"]),
        ("Deployments", _deployments(offline_report, online_report)),
        ("Number of model instances", model["triton"]["instances"]),
        *_gpus(model["triton"]),
        ("Export Precision", export_precision(run).upper()),
        ("Weights", files["weights_origin"]),
        ("Dataset", files["dataset"]),
        ("perf_analyzer offline", _perf_settings(offline_report["perf_analyzer_settings"])),
        ("perf_analyzer online", _online_settings(run, online_report)),
        ("Triton server", f"{prov.get('triton', {}).get('version')} "
                          f"({run['server']['kind']}, {served_by(prov)})"),
        ("perf_analyzer", prov.get("perf_analyzer")),
        ("perf_analyzer stability", _stability(run["perf"])),
        ("Measured", prov["date"]),
        ("Config hash", prov["config_hash"]),
    ])


def _online_settings(run: dict, online_report: dict) -> str:
    if online_report:
        return _perf_settings(online_report["perf_analyzer_settings"])
    return "not in this folder" if serves_online(run) else "not measured (no online scenario)"


def _gpus(triton: dict) -> list[tuple[str, str]]:
    """The row of a deployment over several GPUs (triton.gpus); none for one."""
    gpus = gpu_count(triton)
    return [("GPUs", f"{gpus}, the instances on each (throughput: also a GPU's share)")] \
        if gpus > 1 else []


def configuration_page(run: dict, dataset: str, weights_origin: str, out: Path, *,
                       conversion_check: Path | list, accuracy: Path | list, offline: Path,
                       online: Path | list, offline_json: Path, online_json: Path | list,
                       offline_throughput: Path, offline_latency: Path,
                       online_latency: Path | list, native: Path | list,
                       native_json: Path | list, floor: Path | list,
                       online_tail: Path | list = (), rate: Path | list = (),
                       rate_json: Path | list = (), rate_latency: Path | list = ()) -> str:
    """One configuration's README (`out`): its settings, tables, plots and provenance (plots
    by relative links). The online files are empty lists for a configuration without an
    online scenario (run_facts.serves_online), native's and the floor's on a server the
    pipeline does not start (server.kind remote), the conversion check's, native's and (no
    source model) accuracy's for a user's repository served as it is
    (scenarios.step_refusal), or any of them for a folder put together from runs on several
    machines, whose files are not there yet (APART)."""
    files = {"check": conversion_check, "accuracy": accuracy, "offline": offline,
             **({"native": native} if native else {}), "offline_throughput": offline_throughput,
             "offline_latency": offline_latency, "weights_origin": weights_origin,
             "dataset": dataset}
    if online:
        files |= {"online": online, "online_latency": online_latency,
                  "online_tail": online_tail, "online_json": online_json}
    reports = {"offline": formats.read(Path(offline_json)),
               "online": formats.read(Path(online_json)) if online_json else {},
               "native": formats.read(Path(native_json)) if native_json else {}}
    rel = {k: Path(v).relative_to(out.parent).as_posix() for k, v in files.items()
           if k in ("offline_throughput", "offline_latency", "online_latency", "online_tail")
           and v}
    facts = configuration_headline(offline, online or None, native or None, accuracy or None,
                                   rate_json or None)
    return PAGE.format(
        **_measured(run, files, reports, rel),
        headline=configuration_lines(facts, served_by(reports["offline"]["provenance"])),
        native=_native_section(run, files, native_json), floor=_floor_section(run, floor),
        rate=_rate(run, rate, rate_json, rate_latency, out))


def _measured(run: dict, files: dict, reports: dict, rel: dict) -> dict:
    """The page's fields read from the configuration's tables and JSONs."""
    offline, online, native = reports["offline"], reports["online"], reports["native"]
    prov = offline["provenance"]
    offline_table = read_perf(files["offline"])
    return dict(
        title=f"{run['model']['title']}: {run['gpu']['description']}, "
              f"{run['backend']['title']} with {run['precision'].upper()}",
        params=_params(run, files, offline, online),
        check=markdown_table(pd.read_csv(files["check"])) if files["check"] else
        f"Not measured: {AS_IS}.",
        accuracy=markdown_table(pd.read_csv(files["accuracy"])) if files["accuracy"] else
        _not_here(step_refusal(run, "accuracy")),
        offline_throughput=rel["offline_throughput"], offline_latency=rel["offline_latency"],
        offline=unstable_note(offline_table, run["perf"])
        + markdown_table(measured_columns(offline_table)),
        cache=_cache_section(run, offline, online), online=_online_section(run, files, rel),
        noise=noise_section(offline, online),
        host_load=host_load_section(offline, online, native),
        telemetry=telemetry_section(files, offline, online, native),
        provenance=json.dumps({"offline": prov, "online": online.get("provenance")},
                              indent=2))


def _stability(perf: dict) -> str:
    text = f"{perf['stability_percentage']} %, {perf['max_trials']} trials"
    if perf["stability_percentage"] > PERF_ANALYZER_STABILITY:
        text += (f" (looser than perf_analyzer's and the references' "
                 f"{PERF_ANALYZER_STABILITY} %: perf_overrides for this device)")
    return text + (f", {perf['repeats']} runs a level" if perf.get("repeats", 1) > 1 else "")


def _rate(run: dict, rate: Path | list, rate_json: Path | list, plot: Path | list,
          out: Path) -> str:
    """The rate scenario's section where the configuration has one (empty lists: none)."""
    if not rate:
        return ""
    rel = Path(plot).relative_to(out.parent).as_posix()
    return f"## Rate scenario (open loop)\n\n{rate_section(run, rate, rate_json, rel)}\n"


def _first_calls(native_json: Path) -> str:
    calls = formats.read(Path(native_json)).get("first_call_s", {})
    return ", ".join(f"batch {b}: {s:.2f}" for b, s in calls.items()) or "not recorded"
