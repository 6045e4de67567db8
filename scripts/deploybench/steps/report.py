"""README reports in the reference documents' format: one per configuration, one per
model (with the reference tables' published rows beside ours)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import atomic, layout, provenance, source_model, tail
from .. import search as configuration_search
from ..backends import export_precision
from ..cluster import CPU_KEY
from ..config import online_refusal, serves_online
from ..host_load import CONTENDED_CORES
from ..scenarios import own_server_refusal
from ..tables import (
    COMPONENT_SUM,
    DEVICE_THROUGHPUT,
    REFERENCE_SERIES,
    SHARED_MEMORY,
    STABLE,
    TELEMETRY_COLUMNS,
    THROUGHPUT,
    WINDOW_SPREAD,
    measured_columns,
    published_gpus,
    read_perf,
    reference_rows,
    reference_series,
)
from .markdown import batches_formed, markdown_table
from .plots import frontier_plot
from .rate import rate_section


def served_vs_native(offline_csv: Path, native_csv: Path) -> pd.DataFrame:
    """Offline rows beside the native figure of the same data path: host arrays for
    system shared memory, device-resident tensors for CUDA shared memory (where the
    runner has them)."""
    mismatch = provenance.same_device(*(_provenance(p) for p in (offline_csv, native_csv)))
    if mismatch:
        raise provenance.DifferentDevices(f"served/native not computed: {mismatch}")
    served = read_perf(offline_csv)[["Batch", SHARED_MEMORY, THROUGHPUT]]
    native = pd.read_csv(native_csv)
    column = {"system": THROUGHPUT, "cuda": DEVICE_THROUGHPUT}
    served["native column"] = served[SHARED_MEMORY].map(column).fillna(THROUGHPUT)
    native_value = {(row["Batch"], name): row.get(name) for _, row in native.iterrows()
                    for name in set(column.values())}
    served[f"{THROUGHPUT} native"] = [native_value.get((b, c)) for b, c in
                                      zip(served["Batch"], served["native column"])]
    served = served.rename(columns={THROUGHPUT: f"{THROUGHPUT} served"})
    served["served/native"] = (served[f"{THROUGHPUT} served"]
                               / served[f"{THROUGHPUT} native"]).round(3)
    return served.dropna(subset=[f"{THROUGHPUT} native"])


def _provenance(csv: Path) -> dict:
    """The provenance a table's JSON records (empty where it has none)."""
    path = Path(csv).with_suffix(".json")
    return json.loads(path.read_text()).get("provenance", {}) if path.is_file() else {}


def served_vs_native_table(offline_csv: Path, native_csv: Path) -> str:
    try:
        return markdown_table(served_vs_native(offline_csv, native_csv))
    except provenance.DifferentDevices as refused:
        return f"**{refused}**"


def at_max_batch(ratio: pd.DataFrame) -> pd.Series:
    """The row of the largest batch, of the mode served fastest there."""
    top = ratio[ratio["Batch"] == ratio["Batch"].max()]
    return top.loc[top[f"{THROUGHPUT} served"].idxmax()]


def _params_table(rows: list[tuple[str, object]]) -> str:
    return "\n".join(["| Parameter Name | Parameter Value |", "|:---|:---|",
                      *[f"| {k} | {v} |" for k, v in rows]])


# What a reader should know of the backends of ours that serve a model
BACKEND_NOTES = {"python": " (its stub process, shared-memory copies of every tensor)",
                 "deploybench": " (the pipeline's C++ backend: libtorch in the server's process)"}


def _served_by(prov: dict) -> str:
    server = prov.get("server", {})
    parts = server.get("ensemble_parts")
    if parts:
        return "ensemble of " + ", ".join(f"{m} ({b})" for m, b in parts.items())
    backend = server.get("served_by", "python")
    return f"{backend} backend" + BACKEND_NOTES.get(backend, "")


def _cache_section(run: dict, offline: dict, online: dict) -> str:
    """The sparse model's device-cache counters of an ensemble (empty otherwise)."""
    rows = [{"scenario": name, **{k: report["embedding_cache"][k]
                                  for k in ("lookups", "cache_hits", "hit_rate")}}
            for name, report in (("offline", offline), ("online", online))
            if report.get("embedding_cache")]
    if not rows:
        return ""
    fraction = run["model"]["ensemble"]["cache_fraction"]
    return f"""## Embedding cache (sparse model)

Lookups of every table over the server's session (warm-up included), the share served from
the device cache: each table's most frequent rows in the training split, {fraction:g} of its
rows (HPS's `gpucacheper`); misses read the memory-mapped host storage.

{markdown_table(pd.DataFrame(rows))}

"""


def _online_section(run: dict, files: dict, rel: dict) -> str:
    """The online scenario's table and plot, or why the configuration has none."""
    if not serves_online(run):
        return f"Not measured: {online_refusal(run)}."
    triton = run["model"]["triton"]
    return (f"Dynamic batching (preferred batch sizes {triton['preferred_batch_sizes']}, max "
            f"queue\ndelay {triton['max_queue_delay_us']} µs), HTTP, batch "
            f"{run['model']['online']['batch_size']}.\n\n"
            f"![Latency vs concurrency]({rel['online_latency']})\n\n"
            + unstable_note(read_perf(files["online"]), run["perf"])
            + markdown_table(measured_columns(read_perf(files["online"])))
            + _tail(json.loads(Path(files["online_json"]).read_text()), rel.get("online_tail")))


def _tail(report: dict, plot: str | None) -> str:
    """Every request's percentiles of each level (deploybench.tail) and the batches
    Triton formed, where measured."""
    text = ""
    if report.get("tail"):
        text += ("\n\nEvery request's latency of the windows perf_analyzer kept (its profile "
                 "export), with 95 % bootstrap intervals:\n\n"
                 + markdown_table(tail.table(report["tail"], ("Concurrency",))))
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
        return f"Not measured: {own_server_refusal(run, 'native')}."
    return f"""The same converted model, runner, batch sizes and precision in-process on the same
device (`native.csv`), against the offline scenario through Triton: system shared memory
against the runner with host arrays in and out, CUDA shared memory against it with the
tensors already on the device (its compute limit).

{served_vs_native_table(files["offline"], files["native"])}

{markdown_table(measured_columns(pd.read_csv(files["native"])))}

First call of each batch size in-process (a compile, a CUDA graph's capture), seconds:
{_first_calls(native_json)}"""


def _floor_section(run: dict, floor: Path | list) -> str:
    """What an identity model costs on the same server, or why it was not measured."""
    if not floor:
        return f"Not measured: {own_server_refusal(run, 'floor')}."
    table = read_perf(floor)
    return f"""The same server, scenario and data path with a model that returns zeros at no cost
(`floor.csv`), served once by each backend of ours the server has (`Served by`: python, its
stub process; deploybench, the pipeline's C++ backend): what Triton and each of them cost by
themselves, apart from the model's compute.

{unstable_note(table, run["perf"])}{markdown_table(measured_columns(table))}"""


def _perf_settings(ran: dict) -> str:
    """How perf_analyzer measured a scenario, from what its JSON recorded."""
    modes = ran.get("shared_memory") or ["none"]
    memory = " and ".join(modes if isinstance(modes, list) else [modes])
    window = (f"{ran['measurement_interval_ms'] / 1000:g} s windows"
              if ran.get("measurement_mode") == "time_windows"
              else f"{ran['measurement_request_count']} requests a window")
    warm = ran.get("warmup_windows", 0)
    return (f"{ran['protocol'].upper()}, shared memory {memory}, {window}, "
            + (f"warm-up of {warm} windows" if warm else "no warm-up run"))


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


def configuration_report(spec: dict, conversion_check: Path, accuracy: Path, offline: Path,
                         online: Path | list, offline_json: Path, online_json: Path | list,
                         offline_throughput: Path, offline_latency: Path,
                         online_latency: Path | list, native: Path | list,
                         native_json: Path | list, floor: Path | list, weights: Path, out: Path,
                         online_tail: Path | list = (), rate: Path | list = (),
                         rate_json: Path | list = (), rate_latency: Path | list = ()) -> None:
    """One configuration's README: its settings, tables, plots and provenance (plots by
    relative links). The online files are empty lists for a configuration without an
    online scenario (config.serves_online), native's and the floor's on a server the
    pipeline does not start (server.kind remote)."""
    run = spec["run"]
    files = {"check": conversion_check, "accuracy": accuracy, "offline": offline,
             **({"native": native} if native else {}), "offline_throughput": offline_throughput,
             "offline_latency": offline_latency,
             "weights_origin": source_model.weights_origin(weights),
             "dataset": spec["dataset"]}
    measured_online = serves_online(run)
    if measured_online:
        files |= {"online": online, "online_latency": online_latency,
                  "online_tail": online_tail, "online_json": online_json}
    model, key = run["model"], run["key"]
    offline_report = json.loads(Path(offline_json).read_text())
    online_report = json.loads(Path(online_json).read_text()) if measured_online else {}
    prov = offline_report["provenance"]
    precision = run["precision"].upper()
    title = f"{model['title']}: {run['gpu']['description']}, {run['backend']['title']} " \
            f"with {precision}"
    devices = ", ".join(prov.get("device_check", {}).get("devices", [])) or "CPU"
    params = [
        ("GPU key", key["gpu"]),
        ("Device", devices + (" (GPU key check overridden)"
                              if prov.get("device_check", {}).get("mismatch_allowed") else "")),
        ("Backend", run["backend"]["title"]),
        ("Precision", precision),
        ("Model format", key["backend"]),
        ("Max batch size", model["triton"]["max_batch_size"]),
        ("Deployments", _deployments(offline_report, online_report)),
        ("Number of model instances", model["triton"]["instances"]),
        ("Export Precision", export_precision(run).upper()),
        ("Weights", files["weights_origin"]),
        ("Dataset", files["dataset"]),
        ("perf_analyzer offline", _perf_settings(offline_report["perf_analyzer_settings"])),
        ("perf_analyzer online", _perf_settings(online_report["perf_analyzer_settings"])
                                 if measured_online else "not measured (no online scenario)"),
        ("Triton server", f"{prov.get('triton', {}).get('version')} "
                          f"({run['server']['kind']}, {_served_by(prov)})"),
        ("perf_analyzer", prov.get("perf_analyzer")),
        ("perf_analyzer stability", _stability(run["perf"])),
        ("Measured", prov["date"]),
        ("Config hash", prov["config_hash"]),
    ]
    rel = {k: Path(v).relative_to(out.parent).as_posix() for k, v in files.items()
           if k in ("offline_throughput", "offline_latency", "online_latency", "online_tail")
           and v}
    online_section = _online_section(run, files, rel)
    offline_table = read_perf(files["offline"])
    native_report = json.loads(Path(native_json).read_text()) if native_json else {}
    text = f"""# {title}

Built by the deploybench pipeline: export → conversion → conversion check → Triton model
repository → accuracy on Triton → offline and online performance (perf_analyzer).

## Configuration

{_params_table(params)}

## Conversion check (converted vs source model)

{markdown_table(pd.read_csv(files["check"]))}

## Accuracy on Triton

{markdown_table(pd.read_csv(files["accuracy"]))}

## Offline scenario

Static batching, concurrency 1, perf_analyzer as the configuration says; the `Shared
memory` column: system or none (in the requests), as the references; cuda, in GPU memory,
which a torch runner takes without a host copy. `avg latency (ms)` is perf_analyzer's,
`sum of components (ms)` the references' "avg latency".

![Throughput vs batch]({rel["offline_throughput"]})
![Latency vs batch]({rel["offline_latency"]})

{unstable_note(offline_table, run["perf"])}{markdown_table(measured_columns(offline_table))}

## Serving overhead: Triton vs native

{_native_section(run, files, native_json)}

## Triton's own cost: an identity model

{_floor_section(run, floor)}

{_cache_section(run, offline_report, online_report)}## Online scenario

{online_section}

{_rate(run, rate, rate_json, rate_latency, out)}{_noise(offline_report, online_report)}## Host load

{_host_load(offline_report, online_report, native_report)}

## Telemetry

{_telemetry(files, offline_report, online_report, native_report)}

## Provenance

```json
{json.dumps({"offline": prov, "online": online_report.get("provenance")}, indent=2)}
```
"""
    with atomic.output(out) as tmp:
        tmp.write_text(text)


# perf_analyzer's own stability criterion, which every reference document kept
PERF_ANALYZER_STABILITY = 10


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


def unstable_note(table: pd.DataFrame, perf: dict) -> str:
    """A warning above a table with rows that did not stabilise (perf.on_unstable:
    record): how many, and what their figures are worth."""
    unstable = table[~table[STABLE].astype(bool)]
    if unstable.empty:
        return ""
    return (f"**{len(unstable)} of {len(table)} levels did not stabilise** (`Stable` false): "
            f"perf_analyzer's last windows never agreed within "
            f"{perf['stability_percentage']} % in {perf['attempts']} attempts, so each was "
            "measured once more and kept; its `window spread (%)` (up to "
            f"{unstable[WINDOW_SPREAD].max():g} %) bounds what its figures are worth.\n\n")


def _noise(offline: dict, online: dict) -> str:
    """With perf.repeats: each level's runs, their median's interval and spread."""
    rows = [{"Scenario": scenario, **row}
            for scenario, report in (("offline", offline), ("online", online))
            for row in report.get("repeats", [])]
    if not rows:
        return ""
    table = pd.DataFrame(rows)
    noisy = int(table["noisy"].sum())
    return (f"## Noise\n\nEach level measured {len(rows[0]['runs'])} times on one server "
            "(`perf.repeats`); the tables keep the run of median throughput. `ci95`: the "
            "median's 95 % bootstrap interval; `noisy`: the runs' range is wider than "
            f"perf_analyzer's stability criterion. {noisy} of {len(table)} levels noisy.\n\n"
            + markdown_table(table) + "\n\n")


def _host_load(offline: dict, online: dict, native: dict) -> str:
    """What else used the host's CPUs while each level was measured (deploybench.host_load),
    and the levels measured under contention."""
    rows = [{"Scenario": scenario, **row} for scenario, report in
            (("offline", offline), ("online", online)) for row in report.get("host_load", [])]
    if "host_load" in native:
        rows.append({"Scenario": "native", **native["host_load"]})
    if not rows:
        return "Not recorded (measured before host load was)."
    table = pd.DataFrame(rows)
    gpu = "other_gpu_processes" in table
    if gpu:
        table["other_gpu_processes"] = table["other_gpu_processes"].map(_gpu_processes)
    contended = table[table["contended"]]
    limit = f"{CONTENDED_CORES} cores of other processes"
    verdict = (f"**{len(contended)} of {len(table)} measurements ran beside other load** "
               f"(more than {limit}" + (", or another process on the GPU" if gpu else "")
               + "): compare them with care." if len(contended) else
               f"No measurement ran beside other load (at most {limit}"
               + (", no other process on the GPU" if gpu else "") + ").")
    return ("CPU used by processes outside the step (its server and perf_analyzer "
            "excluded), in cores on average over each measurement"
            + ("; the other processes NVML listed on the GPU at its start and end" if gpu
               else "") + f". {verdict}\n\n" + markdown_table(table))


def _gpu_processes(listed) -> str:
    """Other processes on the GPU as a table cell (pid, name, memory), or why NVML could
    not list them."""
    if not isinstance(listed, list):
        return listed if isinstance(listed, str) else ""
    return ", ".join(
        f"{p['pid']} {p['name'] or ('?' if p['seen'] else '(another PID namespace)')}"
        + (f" ({p['used_mib']:.0f} MiB)" if p.get("used_mib") is not None else "")
        for p in listed) or "none"


def _telemetry(files: dict, offline: dict, online: dict, native: dict) -> str:
    """What the serving processes and the GPU did while each row was measured (the
    telemetry columns of offline.csv, online.csv and native.csv), and the readings NVML
    could not give."""
    keys = ["Batch", "Concurrency", SHARED_MEMORY]
    parts = []
    for scenario in ("offline", "online", "native"):
        if scenario not in files:  # no online scenario
            continue
        table = pd.read_csv(files[scenario])
        recorded = [c for c in TELEMETRY_COLUMNS if c in table]
        if recorded:
            parts.append(table[[c for c in keys if c in table] + recorded]
                         .assign(Scenario=scenario))
    if not parts:
        return "Not recorded (measured before telemetry was)."
    table = pd.concat(parts, ignore_index=True)
    table = table[["Scenario", *[c for c in table if c != "Scenario"]]]
    missing = sorted({f"{what.replace('_', ' ')}: {why}"
                      for report in (offline, online, native)
                      for row in report.get("telemetry", [])
                      for what, why in _unavailable(row.get("gpu"))})
    gpu = any("gpu" in row for report in (offline, online, native)
              for row in report.get("telemetry", []))
    text = ("CPU (% of one core) and resident memory of the process tree that served each "
            "row: the server and its python-backend stubs, the step itself for native "
            "(host-array timing).")
    if gpu:
        text += (" On the GPU, through NVML, sampled every 100 ms: utilisation, memory, "
                 "power, SM clock, the clock event (throttle) reasons seen; energy per "
                 "inference is the mean power over the throughput.")
    if missing:
        text += "\n\nNot available here: " + "; ".join(missing) + "."
    return text + "\n\n" + markdown_table(table)


def _unavailable(gpu) -> list[tuple[str, str]]:
    """(reading, reason) of what NVML could not give in one row's GPU telemetry."""
    if isinstance(gpu, str):
        return [("GPU telemetry", gpu.removeprefix("unavailable: "))]
    return [(what, value.removeprefix("unavailable: ")) for what, value in (gpu or {}).items()
            if isinstance(value, str) and value.startswith("unavailable: ")]


def _first_calls(native_json: Path) -> str:
    calls = json.loads(Path(native_json).read_text()).get("first_call_s", {})
    return ", ".join(f"batch {b}: {s:.2f}" for b, s in calls.items()) or "not recorded"


def _column(folder: Path) -> str:
    where = layout.configuration_of(folder)
    return f"{where['gpu']} {where['name']}"


# What tells the reference result tables of one document apart (the label of a column).
_REFERENCE_SERIES = ["gpu_key", *REFERENCE_SERIES]


def _reference_rows(reference_csv: Path, document: str, where: dict,
                    scenario: str) -> pd.DataFrame:
    """The published rows of a scenario with our names for batch and concurrency. A table
    without one of them (FastPitch's) ran offline at concurrency 1 and online at the batch
    Little's law gives."""
    ref = reference_rows(reference_csv, document, where, scenario).rename(
        columns={"batch": "Batch", "concurrency": "Concurrency"})
    ref["Concurrency"] = ref["Concurrency"].fillna(1)
    little = ref[THROUGHPUT] * ref["avg latency (ms)"] / 1e3 / ref["Concurrency"]
    ref["Batch"] = ref["Batch"].fillna(little.round())
    return ref.astype({"Batch": int, "Concurrency": int})


def _series_label(series: tuple) -> str:
    gpu, *rest = series
    return f"{gpu} {reference_series(*rest)} (reference)"


def _measured(configs: list[Path], scenario: str, cpu: bool = False):
    """(GPU key, label, table) of each configuration's measured scenario (the CPU key's
    too with `cpu`), one per shared-memory mode."""
    for readme in configs:
        folder = readme.parent
        gpu = layout.configuration_of(folder)["gpu"]
        if (gpu == CPU_KEY and not cpu) or not (folder / f"{scenario}.csv").is_file():
            continue
        measured = read_perf(folder / f"{scenario}.csv")
        for mode, rows in measured.groupby(SHARED_MEMORY, sort=False):
            label = _column(folder) + ("" if mode in ("system", "none") else f" ({mode} shm)")
            yield gpu, label, rows


def reference_latencies(configs: list[Path], reference_csv: Path, document: str,
                        where: dict, scenario: str) -> pd.DataFrame:
    """Throughput and latencies of the published rows and of this pipeline's GPU
    configurations, joined on batch and concurrency (the published rows' pairs only);
    `avg latency (ms)` is the references' sum of components, ours summed the same way."""
    ref = _reference_rows(reference_csv, document, where, scenario)
    keys = ["Batch", "Concurrency"]
    columns = [THROUGHPUT, "p50 latency (ms)", "p90 latency (ms)", "p95 latency (ms)",
               "p99 latency (ms)", "avg latency (ms)"]
    parts = [rows[keys + columns].assign(Configuration=_series_label(series))
             for series, rows in ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False)]
    parts += [rows.assign(**{"avg latency (ms)": rows[COMPONENT_SUM]})[keys + columns]
              .assign(Configuration=label) for _, label, rows in _measured(configs, scenario)]
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    pairs = ref[keys].drop_duplicates()
    table = table.merge(pairs, on=keys)  # only where a published row has the same pair
    ours = ~table["Configuration"].str.endswith("(reference)")
    if not ours.any():
        return pd.DataFrame()
    table = table.assign(_ours=ours).sort_values([*keys, "_ours", "Configuration"])
    return table[[*keys, "Configuration", *columns]].reset_index(drop=True)


# The published settings of a series (reference column) and ours, from what a
# configuration's offline.json recorded (and its backend).
_SETTINGS = {
    "max_batch_size": ("Max batch size", lambda ran, backend: ran["triton"]["max_batch_size"]),
    "number_of_model_instances": ("Number of model instances",
                                  lambda ran, backend: ran["triton"]["instances"]),
    "triton_max_queue_delay": ("Triton max queue delay (us)",
                               lambda ran, backend: ran["triton"]["max_queue_delay_us"]),
    "triton_preferred_batch_sizes": (
        "Triton preferred batch sizes",
        lambda ran, backend: " ".join(map(str, ran["triton"]["preferred_batch_sizes"]))),
    "request_count": (
        "Request count (offline)",
        lambda ran, backend: ran["perf_analyzer_settings"].get("measurement_request_count")),
    "export_precision": ("Export precision", lambda ran, backend: export_precision(ran).upper()),
    "nvidia_tensorrt_capture_cuda_graph": (
        "TensorRT CUDA graphs",
        lambda ran, backend: ("Enabled" if ran["triton"].get("cuda_graphs") else "Disabled")
        if backend.endswith("trt") else None),
}


def _setting(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value in ("-", "None"):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def reference_settings(configs: list[Path], reference_csv: Path, document: str,
                       where: dict) -> pd.DataFrame:
    """The settings each published table states (series with the same settings in one
    column) beside the ones each GPU configuration ran with; empty where a table says
    nothing."""
    ref = _reference_rows(reference_csv, document, where, "offline")
    columns: dict[str, list[str]] = {}
    for series, rows in ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False):
        values = tuple(_setting(rows[c].iloc[0]) for c in _SETTINGS)
        columns.setdefault(values, []).append(_series_label(series).removesuffix(" (reference)"))
    table = pd.DataFrame({"Setting": [name for name, _ in _SETTINGS.values()]})
    for values, labels in columns.items():
        table[", ".join(labels) + " (reference)"] = values
    for readme in configs:
        folder = readme.parent
        where = layout.configuration_of(folder)
        if where["gpu"] == "cpu":
            continue
        ran = json.loads((folder / "offline.json").read_text())
        table[_column(folder)] = [_setting(read(ran, where["backend"]))
                                  for _, read in _SETTINGS.values()]
    return table


def reference_accuracy(configs: list[Path], reference: dict) -> pd.DataFrame:
    """The published tables' metrics (reference.metrics: their column -> our metric) beside
    each configuration's served value of the same metric (accuracy.csv)."""
    rows = reference_rows(Path(reference["path"]), reference["document"],
                          reference.get("where", {}))
    table = []
    for column, metric in reference["metrics"].items():
        for series, values in rows.groupby(REFERENCE_SERIES, dropna=False)[column]:
            published = sorted(set(values.dropna()))
            table.append({"Metric": metric,
                          "Configuration": f"{reference_series(*series)} (reference)",
                          "Value": " / ".join(f"{v:g}" for v in published)})
        for readme in configs:
            accuracy = pd.read_csv(readme.parent / "accuracy.csv")
            measured = accuracy[accuracy["name"] == metric]
            if len(measured):
                table.append({"Metric": metric, "Configuration": _column(readme.parent),
                              "Value": f"{measured['triton'].iloc[0]:.4g}"})
    return pd.DataFrame(table)


def reference_comparison(configs: list[Path], reference_csv: Path, document: str,
                         where: dict, scenario: str) -> pd.DataFrame:
    """Inferences/second of this pipeline's GPU configurations beside the reference's published
    rows (every GPU, backend and precision of the document, narrowed by `where`: column ->
    value) at the same batch size and concurrency."""
    keys = ["Batch", "Concurrency"]
    ref = _reference_rows(reference_csv, document, where, scenario)
    table = None
    for _, label, rows in _measured(configs, scenario):
        ours = rows[[*keys, THROUGHPUT]].rename(columns={THROUGHPUT: label})
        table = ours if table is None else table.merge(ours, on=keys, how="outer")
    if table is None:
        return pd.DataFrame()
    for series, rows in ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False):
        published = rows[[*keys, THROUGHPUT]].drop_duplicates(keys).rename(
            columns={THROUGHPUT: _series_label(series)})
        table = table.merge(published, on=keys, how="left")
    return table.sort_values(keys)


def frontier_lines(configs: list[Path], reference: dict | None, scenario: str) -> list:
    """The lines of a scenario's frontier plot (plots.frontier_plot): each configuration's
    rows per shared-memory mode (`avg latency (ms)` the sum of components, as the published
    tables have it); beside a GPU key's, its published tables, or where it has none (an
    H100) every published table, labelled with its GPU."""
    order = "Batch" if scenario == "offline" else "Concurrency"
    lines = [(gpu, label, False,
              rows.assign(**{"avg latency (ms)": rows[COMPONENT_SUM]}).sort_values(order))
             for gpu, label, rows in _measured(configs, scenario, cpu=True)]
    if not reference:
        return lines
    ref = _reference_rows(Path(reference["path"]), reference["document"],
                          reference.get("where", {}), scenario)
    published = [(series, rows.sort_values(order)) for series, rows in
                 ref.groupby(_REFERENCE_SERIES, sort=True, dropna=False)]
    for gpu in dict.fromkeys(gpu for gpu, *_ in lines):
        if gpu == CPU_KEY:  # no published row ran on a CPU
            continue
        own = [(series, rows) for series, rows in published if series[0] == gpu]
        lines += [(gpu, _series_label(series), True, rows) for series, rows in own or published]
    return lines


def dated_sets_table(out: Path) -> pd.DataFrame:
    """A row per configuration of each dated measurement set beside model report `out`
    (a set without one, e.g. a probe, in one row): its notes' title and what it measured."""
    rows = []
    for folder in layout.dated_sets(out):
        notes = folder / layout.SET_NOTES
        title = notes.read_text().splitlines()[0].lstrip("# ").strip()
        where = notes.relative_to(Path(out).parent)
        configs = sorted(c for c in folder.glob("*_*")
                         if any((c / f"{s}.csv").is_file() for s in ("offline", "online")))
        for config in configs or [None]:
            row = {"GPU": folder.parent.name, "Set": f"[{folder.name}]({where})",
                   "What": title, "Configuration": config.name if config else "",
                   "Best offline inf/s": None, "Online max inf/s": None}
            for scenario, column in (("offline", "Best offline inf/s"),
                                     ("online", "Online max inf/s")):
                if config and (config / f"{scenario}.csv").is_file():
                    row[column] = pd.read_csv(config / f"{scenario}.csv")[THROUGHPUT].max()
            rows.append(row)
    return pd.DataFrame(rows)


def searches_table(out: Path) -> pd.DataFrame:
    """A row per configuration search beside model report `out` (its search.json)."""
    rows = []
    for path in layout.searches(out):
        found = json.loads(path.read_text())
        # <gpu>/[<dated set>/]<configuration>/search
        where = path.parent.relative_to(Path(out).parent)
        budget = found["p99_budget_ms"]
        rank = configuration_search.rank_of(found)
        row = {
            "GPU": where.parts[0],
            "Search": f"[{'/'.join(where.parts[1:-1])}]({where}/README.md)",
            "Strategy": f"{found['strategy']}, {len(found['points'])} of {len(found['grid'])}",
            "p99 budget (ms)": budget}
        for who, point in (("Winner", found["winner"]), ("Seed's values", found["seed"])):
            result = found["results"].get(point)
            row |= {who: point, f"{who}: within the budget": _search_peak(result, budget, rank),
                    f"{who}: online peak": _search_peak(result, None, rank)}
        rows.append(row)
    return pd.DataFrame(rows)


def _search_peak(result: dict | None, budget_ms: float | None, rank: str) -> str:
    """A search point's throughput within the budget as its search ranked it (its best
    online level of all, without one), its concurrency (or the two levels interpolated
    between, ≈) and p99 ("not measured", "failed", "none" within the budget)."""
    if result is None:
        return "not measured"
    if result["status"] != configuration_search.OK:
        return "failed"
    top = configuration_search.at_budget(result, budget_ms, rank)
    if top is None:
        return "none"
    if "between" in top:
        low, high = top["between"]
        return f"≈{top['throughput']:,.0f} inf/s between {low} and {high}, p99 {budget_ms:g} ms"
    return (f"{top['throughput']:,.0f} inf/s at {top['concurrency']}, "
            f"p99 {top['p99_ms']:.2f} ms")


def model_report(spec: dict, configs: list[Path], out: Path, offline_frontier: Path,
                 online_frontier: Path) -> None:
    """Every configuration of a model built so far (best offline throughput, lowest online
    latency, serving overhead) with links to their reports, and where the model has a
    reference table, GPU results beside the published ones. `configs`: the configuration
    reports this run built; the others already on disk (committed GPU results) join them."""
    configs = sorted(set(layout.configuration_reports(out)) | {Path(c) for c in configs})
    reference = spec.get("reference")
    rows = []
    for readme in configs:
        folder = readme.parent
        offline = pd.read_csv(folder / "offline.csv")
        # a configuration without an online scenario (config.serves_online) has no online.csv
        online = (pd.read_csv(folder / "online.csv") if (folder / "online.csv").is_file()
                  else pd.DataFrame({THROUGHPUT: []}))
        best = offline.loc[offline[THROUGHPUT].idxmax()]
        where = layout.configuration_of(folder)
        gpu, config = where["gpu"], where["name"]
        try:
            ratio = at_max_batch(served_vs_native(folder / "offline.csv",
                                                  folder / "native.csv"))
        except provenance.DifferentDevices:  # the configuration's report says why
            ratio = {"served/native": None, SHARED_MEMORY: "(different devices)"}
        except FileNotFoundError:  # measured on a remote server: no native figure
            ratio = {"served/native": None, SHARED_MEMORY: "(no native: remote server)"}
        rows.append({
            "GPU": gpu, "Configuration": f"[{config}]({gpu}/{config}/README.md)",
            "Export": export_precision(json.loads((folder / "offline.json").read_text())).upper(),
            "Best offline inf/s": best[THROUGHPUT], "at batch": int(best["Batch"]),
            "Smallest offline batch": int(offline["Batch"].min()),
            "its avg latency (ms)": offline.loc[offline["Batch"].idxmin(), "avg latency (ms)"],
            "Online max inf/s": online[THROUGHPUT].max() if len(online) else None,
            "served/native at max batch": ratio["served/native"],
            "its shared memory": ratio[SHARED_MEMORY],
        })
    table = pd.DataFrame(rows)
    text = (f"# {spec['title']}: results\n\nEvery configuration of `{spec['model']}` built "
            "so far.\n\n")
    text += markdown_table(table) if rows else "Nothing built yet."
    for scenario, png in (("offline", offline_frontier), ("online", online_frontier)):
        frontier_plot(frontier_lines(configs, reference, scenario), scenario,
                      spec["title"], png)
    text += ("\n\n## Throughput against latency\n\nEach configuration's offline sweep (a "
             "point per batch) and online sweep (a point per concurrency) against p99 and "
             "average latency, per GPU key; dashed, the published tables of the same GPU, "
             "or, beside a GPU key without any (an H100), every published table, labelled "
             "with its GPU.\n\n"
             + "\n\n".join(f"![{s} frontier]({Path(png).relative_to(Path(out).parent)})"
                             for s, png in (("offline", offline_frontier),
                                            ("online", online_frontier))))
    searched = searches_table(out)
    if len(searched):
        text += ("\n\n## Configuration searches\n\nThe best Triton configuration under each "
                 "search's latency budget (online), against the configuration's own (the "
                 "seed's values); each search's README has every point, the frontier and the "
                 "winner's config.pbtxt.\n\n" + markdown_table(searched))
    dated = dated_sets_table(out)
    if len(dated):
        text += ("\n\n## Dated measurement sets\n\nRuns kept apart from the configuration "
                 "folders (partial sweeps, repeats, probes), each with its notes, logs and "
                 "provenance; empty cells: not measured in that set.\n\n"
                 + markdown_table(dated))
    if reference and reference.get("pairs"):
        rows = reference_rows(Path(reference["path"]), reference["document"],
                              reference.get("where", {}))
        gpus = published_gpus(rows)
        pairs = pd.DataFrame([{"Published table": name, "Configuration": config,
                               "GPU keys": ", ".join(gpus.get(name, []))}
                              for name, config in reference["pairs"].items()])
        text += ("\n\n## The configurations that reproduce the published tables\n\n"
                 "`snakemake seeds` builds each on the GPU keys of its tables.\n\n"
                 + markdown_table(pairs))
    if reference and reference.get("metrics"):
        accuracy = reference_accuracy(configs, reference)
        if len(accuracy):
            text += ("\n\n## Accuracy beside the published tables\n\nThe published value "
                     "of each table (the same on every GPU key where one value is shown) "
                     "and the accuracy step's on Triton for each configuration.\n\n"
                     + markdown_table(accuracy))
    if reference and reference.get("differences"):
        text += ("\n\n## Where this model is not run as its reference ran it\n\n"
                 + "\n".join(f"- {item}" for item in reference["differences"]))
    if reference:
        where, path, document = reference.get("where", {}), Path(reference["path"]), \
            reference["document"]
        narrowed = "".join(f", {k} {v}" for k, v in where.items())
        source = (f"Reference rows: `{reference['table']}` (parsed from {document})"
                  f"{narrowed}.\n\n")
        for scenario in ("offline", "online"):
            compared = reference_comparison(configs, path, document, where, scenario)
            if len(compared):
                text += (f"\n\n## {scenario.capitalize()}: inferences/second beside the "
                         f"published tables\n\n{source}" + markdown_table(compared))
            latencies = reference_latencies(configs, path, document, where, scenario)
            if len(latencies):
                text += (f"\n\n## {scenario.capitalize()}: latencies beside the published "
                         "tables\n\nAt each batch size and concurrency a published table "
                         "has; `avg latency (ms)` is the sum of the latency components, as "
                         "the references compute it.\n\n" + markdown_table(latencies))
        settings = reference_settings(configs, path, document, where)
        if any(layout.configuration_of(Path(c).parent)["gpu"] != "cpu" for c in configs):
            text += ("\n\n## Settings beside the published tables\n\nWhat each published "
                     "table states (tables stating the same in one column; empty: not "
                     "stated) and what each GPU configuration ran with.\n\n"
                     + markdown_table(settings))
    with atomic.output(out) as tmp:
        tmp.write_text(text + "\n")
