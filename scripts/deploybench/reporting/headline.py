"""The answer first: a configuration's headline (best offline throughput, online peak and
its p99, the highest open-loop rate within its budget, served/native at the largest batch,
accuracy against the source model, whether the host was contended, the backend that
served) and a model's (a line a configuration, the fastest offline and online). Every
number is read from the files the reports read; a scenario without its file is "not
measured", never a number.

A model's headline lines are Markdown and reStructuredText alike (bullets, bold, plain
text): the HTML report's front page includes them as they are (report/workflow.rst)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..records import facts, formats
from ..records.tables import GATED_KINDS, SHARED_MEMORY, STABLE, THROUGHPUT, lead_mode, read_perf
from ..settings.deployments import gpu_count
from .scenario_sources import measured_apart
from .served_native import RATIO, at_max_batch, left_out, report_of, served_vs_native

NOT_MEASURED = "not measured"
CONTENDED_MARK = " (host contended)"  # beside a number measured beside other load
UNSTABLE_MARK = " (unstable)"  # beside a number whose level did not settle (perf_analyzer)

# What a reader should know of the backends of ours that serve a model
BACKEND_NOTES = {"python": " (its stub process, shared-memory copies of every tensor)",
                 "deploybench": " (the pipeline's C++ backend, in the server's process: {})"}
# The C++ backend's engines by runner (before they were recorded: libtorch only)
ENGINES = {"torch": "libtorch", "torch-cudagraph": "libtorch, CUDA graphs", "aoti": "libtorch",
           "aoti-cudagraph": "libtorch, CUDA graphs", "onnxruntime": "ONNX Runtime",
           "embeddings": "its embedding store", "identity": "its identity engine"}


def served_by(prov: dict, notes: bool = True) -> str:
    """The Triton backend that served (an ensemble: each part's), from a provenance."""
    server = prov.get("server", {})
    parts, engines = server.get("ensemble_parts"), server.get("engines", {})

    def engine(model: str) -> str:
        return ENGINES.get(engines.get(model, "torch"), "libtorch")
    if parts:
        return "ensemble of " + ", ".join(
            f"{m} ({b}, {engine(m)})" if b == "deploybench" else f"{m} ({b})"
            for m, b in parts.items())
    backend = server.get("served_by", "python")  # before it was recorded: python only
    note = BACKEND_NOTES.get(backend, "").format(engine(next(iter(engines), "")))
    return f"{backend} backend" + (note if notes else "")


def _level(row: pd.Series) -> dict:
    return {"Batch": row["Batch"], "Concurrency": row["Concurrency"],
            SHARED_MEMORY: row[SHARED_MEMORY]}


def _peak(csv: Path | None) -> dict | None:
    """A scenario's fastest row in the mode its figures lead with (tables.lead_mode: a
    reference's where measured): throughput, batch, concurrency, mode, p99 and whether its
    level ran beside other load; the other modes' fastest beside it (`others`); None where
    the scenario has no table."""
    if not csv or not Path(csv).is_file():
        return None
    table = read_perf(csv)
    if table.empty:
        return None
    mode = lead_mode(table[SHARED_MEMORY])
    row = table.loc[table[table[SHARED_MEMORY] == mode][THROUGHPUT].idxmax()]
    others = table[table[SHARED_MEMORY] != mode].groupby(SHARED_MEMORY, sort=True)[THROUGHPUT]
    return {"throughput": float(row[THROUGHPUT]), "batch": int(row["Batch"]),
            "concurrency": int(row["Concurrency"]), "shared_memory": mode,
            "modes": table[SHARED_MEMORY].nunique(), "p99_ms": float(row["p99 latency (ms)"]),
            "others": {m: float(v) for m, v in others.max().items()},
            "contended": facts.contended(report_of(csv), _level(row)),
            "unstable": not pd.isna(row[STABLE]) and not bool(row[STABLE])}


def _ratio(offline: Path, native: Path | None) -> dict | None:
    """served/native at the largest batch (its fastest mode), or why there is none."""
    if not native or not Path(native).is_file():
        return None
    try:
        row = at_max_batch(served_vs_native(offline, native))
    except facts.DifferentDevices:
        return {"why": "not computed: served and native ran on different devices"}
    except ValueError:  # no batch of native's beside the offline rows
        return None
    return {"batch": int(row["Batch"]), "shared_memory": row[SHARED_MEMORY],
            "ratio": None if pd.isna(row[RATIO]) else float(row[RATIO]), "why": left_out(row)}


def _accuracy(csv: Path | None) -> dict | None:
    """The deviation checks' verdict (served outputs against the source model's within
    their limits), the largest deviation against its limit and the first metric."""
    if not csv or not Path(csv).is_file():
        return None
    table = pd.read_csv(csv)
    source = "source" if "source" in table else "native"  # its name before the source model
    checks = table[table["kind"].isin(GATED_KINDS)]
    metrics = table[table["kind"] == "metric"]
    passed = bool(len(checks)) and bool((checks["passed"].astype(str) == "True").all())
    return {"passed": passed, "checks": len(checks),
            "deviation": _worst(checks[checks["kind"] == "deviation"]),
            "metric_change": _worst(checks[checks["kind"] == "metric_change"]),
            "metric": None if metrics.empty else
            (metrics.iloc[0]["name"], float(metrics.iloc[0]["triton"]),
             float(metrics.iloc[0][source]))}


def _worst(checks: pd.DataFrame) -> tuple[str, float, float] | None:
    """The check nearest its limit, or furthest past it (a NaN furthest): (what, value,
    limit)."""
    if checks.empty:
        return None
    ratio = checks["triton"] / checks["limit"].clip(lower=1e-300)
    worst = checks.loc[ratio.fillna(float("inf")).idxmax()]
    return worst["name"].split(":", 1)[-1], float(worst["triton"]), float(worst["limit"])


def _host(reports: dict[str, dict]) -> dict | None:
    """The measurements that ran beside other load (scenario and level), of how many;
    None where no JSON recorded host load."""
    measured, contended = 0, []
    for scenario, report in reports.items():
        load = report.get("host_load")
        entries = [load] if isinstance(load, dict) else (load or [])
        measured += len(entries)
        key = "Concurrency" if scenario == "online" else "Batch"
        contended += [scenario + (f" {key.lower()} {e[key]}" if key in e else "")
                      for e in entries if e.get("contended")]
    return {"measured": measured, "contended": contended} if measured else None


def _rate(rate_json: Path | None) -> dict | None:
    """The rate scenario's answer: the highest rate within its budget (None: below the
    lowest measured) and that level's throughput; None where the scenario has no file."""
    if not rate_json or not Path(rate_json).is_file():
        return None
    result = formats.read(rate_json)
    found = result["max_rate_within_budget"]
    return {"budget_ms": result["settings"]["p99_budget_ms"], "rate": found["rate"],
            "throughput": found["throughput"], "above": found["bracket"][1] is None}


def configuration_headline(offline: Path, online: Path | None = None,
                           native: Path | None = None, accuracy: Path | None = None,
                           rate_json: Path | None = None) -> dict:
    """A configuration's headline facts from its files (None: not measured); the JSONs
    beside the CSVs give host load and provenance."""
    reports = {name: report_of(csv) for name, csv in
               (("offline", offline), ("online", online), ("native", native)) if csv}
    return {"offline": _peak(offline), "online": _peak(online), "rate": _rate(rate_json),
            "served_native": _ratio(offline, native), "accuracy": _accuracy(accuracy),
            "host": _host(reports), "apart": measured_apart(Path(offline).parent),
            "served_by": served_by(reports["offline"].get("provenance", {}), notes=False),
            "gpus": gpu_count(reports["offline"].get("triton", {}))}


def _inferences(peak: dict, gpus: int = 1) -> str:
    """A peak's throughput; over several GPUs (triton.gpus), also a GPU's share."""
    share = f" ({peak['throughput'] / gpus:,.0f} a GPU of {gpus})" if gpus > 1 else ""
    return f"{peak['throughput']:,.0f} inf/s{share}" + (
        CONTENDED_MARK if peak["contended"] else "") + (
        UNSTABLE_MARK if peak.get("unstable") else "")


def offline_text(facts: dict) -> str:
    """The best offline figure in the mode the references used, the other modes' beside."""
    peak = facts["offline"]
    if not peak:
        return NOT_MEASURED
    mode = f", {peak['shared_memory']} shared memory" if peak["modes"] > 1 else ""
    others = "".join(f" ({v:,.0f} in {m} shared memory)"
                     for m, v in peak.get("others", {}).items())
    return f"{_inferences(peak, facts.get('gpus', 1))} at batch {peak['batch']}{mode}{others}"


def online_text(facts: dict) -> str:
    peak = facts["online"]
    if not peak:
        return NOT_MEASURED
    return (f"{_inferences(peak, facts.get('gpus', 1))} at concurrency {peak['concurrency']}, "
            f"p99 {peak['p99_ms']:.3g} ms")


def rate_text(facts: dict) -> str:
    found = facts.get("rate")
    if not found:
        return NOT_MEASURED
    if found["rate"] is None:
        return f"no rate measured kept p99 within {found['budget_ms']:g} ms"
    return (f"{'above ' if found['above'] else ''}{found['rate']:,.4g} requests/s "
            f"({found['throughput']:,.0f} inf/s) within p99 {found['budget_ms']:g} ms")


def ratio_text(facts: dict) -> str:
    ratio = facts["served_native"]
    if not ratio:
        return NOT_MEASURED
    if "batch" not in ratio:
        return ratio["why"]
    value = f"{ratio['ratio']:.3g}" if ratio["ratio"] is not None else ratio["why"]
    return f"{value} at batch {ratio['batch']} ({ratio['shared_memory']} shared memory)"


def accuracy_text(facts: dict, detail: bool = True) -> str:
    found = facts["accuracy"]
    if not found:
        return NOT_MEASURED
    if not found["checks"]:
        return "no deviation check recorded"
    text = "passed" if found["passed"] else "failed"
    if not detail:
        return text
    parts = []
    if found["deviation"]:
        output, value, limit = found["deviation"]
        parts.append(f"largest deviation from the source model {value:.3g} (limit {limit:g}, "
                     f"output {output})")
    if found.get("metric_change"):
        metric, moved, limit = found["metric_change"]
        parts.append(f"{metric} moved {moved:.3g} from the source model's (limit {limit:.3g})")
    if found["metric"]:
        name, served, source = found["metric"]
        parts.append(f"{name} {served:.4g} on Triton, {source:.4g} from the source model")
    return f"{text}: " + "; ".join(parts)


def host_text(facts: dict) -> str:
    host = facts["host"]
    if not host:
        return "host load not recorded"
    if not host["contended"]:
        return f"not contended during any of {host['measured']} measurements"
    return (f"contended during {len(host['contended'])} of {host['measured']} measurements "
            f"({', '.join(host['contended'])}): compare those with care")


def host_short(facts: dict) -> str:
    host = facts["host"]
    if not host:
        return "host load not recorded"
    if not host["contended"]:
        return "host not contended"
    return f"host contended in {len(host['contended'])} of {host['measured']} measurements"


def configuration_lines(facts: dict, backend: str) -> str:
    """A configuration report's headline, as Markdown bullets; `backend`: who served, in
    the report's words (served_by with its notes)."""
    return "\n".join([
        f"- **Offline** (best of the batch sweep): {offline_text(facts)}",
        f"- **Online** peak: {online_text(facts)}",
        f"- **Rate** (open loop): {rate_text(facts)}",
        f"- **Served/native** at the largest batch: {ratio_text(facts)}",
        f"- **Accuracy** against the source model: {accuracy_text(facts)}",
        f"- **Host**: {host_text(facts)}",
        f"- **Served by**: {backend}",
        *([f"- **Measured apart**: {facts['apart']}"] if facts.get("apart") else [])])


def model_lines(headlines: dict[str, dict]) -> str:
    """A model report's headline: a bullet a configuration (label -> its facts), then the
    fastest offline and online; Markdown and reStructuredText alike."""
    if not headlines:
        return "- Nothing built yet."
    lines = [f"- **{label}**: offline {offline_text(f)}; online {online_text(f)}; "
             + (f"rate {rate_text(f)}; " if f.get("rate") else "")
             + f"served/native {ratio_text(f)}; accuracy {accuracy_text(f, detail=False)}; "
             f"{host_short(f)}; {f['served_by']}"
             + (f"; {f['apart']}" if f.get("apart") else "")
             for label, f in headlines.items()]
    fastest = []
    for scenario in ("offline", "online"):
        measured = {label: f[scenario] for label, f in headlines.items() if f[scenario]}
        if measured:
            label = max(measured, key=lambda k: measured[k]["throughput"])
            peak = measured[label]
            notes = [f"{peak['shared_memory']} shared memory"] if peak["modes"] > 1 else []
            notes += ["host contended"] if peak["contended"] else []
            notes += ["its scenarios measured apart"] if headlines[label].get("apart") else []
            fastest.append(f"{scenario} **{label}** ({peak['throughput']:,.0f} inf/s"
                           + "".join(f", {n}" for n in notes) + ")")
        else:
            fastest.append(f"{scenario} {NOT_MEASURED}")
    return "\n".join([*lines, "- Fastest " + "; fastest ".join(fastest)])
