"""What to ship, for one model on one GPU key: every measurement under
results/<model>/<gpu>/ (configuration folders, dated sets, search points; both backends)
ranked by the most inferences a second at a level whose p99 stays within the budget, the
winner with what a service owner asks (who served it, its maximum Poisson rate, served/native,
GPU utilisation and energy there, the config.pbtxt to ship) and the runners-up, each marked
where its figure is contended, unstable, from older code or a serving path since superseded.
Read from the files the steps wrote; nothing is measured here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..backends import QUANTIZED
from ..records import facts, formats
from ..records.tables import (
    ENERGY_PER_INFERENCE,
    GATED_KINDS,
    GPU_UTIL_MEAN,
    STABLE,
    THROUGHPUT,
    accuracy_failures,
    read_perf,
)
from ..settings.deployments import gpu_count
from .headline import configuration_headline, ratio_text, served_by
from .markdown import markdown_table
from .served_native import report_of

P99 = "p99 latency (ms)"
RUNNERS_UP = 5
# The scenarios a level can come from, the one a service runs first
SCENARIOS = ("online", "offline")


def measurements(gpu_root: Path) -> list[Path]:
    """Every folder under results/<model>/<gpu>/ that holds a measured scenario."""
    return sorted({csv.parent for scenario in SCENARIOS
                   for csv in Path(gpu_root).rglob(f"{scenario}.csv")})


def _level(folder: Path, scenario: str, budget_ms: float) -> dict | None:
    """The scenario's fastest level within the budget, with what the page says of it."""
    csv = folder / f"{scenario}.csv"
    if not csv.is_file():
        return None
    table = read_perf(csv)
    within = table[table[P99] <= budget_ms]
    if within.empty:
        return None
    row = within.loc[within[THROUGHPUT].idxmax()]
    report = report_of(csv)
    level = {"Batch": row["Batch"], "Concurrency": row["Concurrency"]}
    prov = report.get("provenance", {})
    gpus = gpu_count(report.get("triton", {}))
    return {
        "folder": folder, "scenario": scenario, "throughput": float(row[THROUGHPUT]),
        "gpus": gpus, "per_gpu": float(row[THROUGHPUT]) / gpus,
        "p99_ms": float(row[P99]), "batch": int(row["Batch"]),
        "concurrency": int(row["Concurrency"]), "shared_memory": row.get("Shared memory"),
        "stable": bool(row[STABLE]) if not pd.isna(row[STABLE]) else True,
        "contended": facts.contended(report, level),
        "gpu_util": row.get(GPU_UTIL_MEAN), "energy_mj": row.get(ENERGY_PER_INFERENCE),
        "served_by": served_by(prov, notes=False),
        "backend": prov.get("server", {}).get("served_by", "python"),
        "code": prov.get("project", {}).get("code"),
        "measured": prov.get("date") or "",
    }


def accuracy_refusal(folder: Path, gpu_root: Path) -> str | None:
    """Why a measurement of a quantized precision may not ship: its configuration's
    accuracy.csv (beside it, or above a search point or a dated set's pass) failed, with
    its numbers, or is not there; None for a floating precision, or one that passed."""
    key = next((p for p in (folder, *folder.parents) if p == gpu_root or
                p.name.rpartition("_")[2] in QUANTIZED), gpu_root)
    if key == gpu_root:
        return None
    csv = key / "accuracy.csv"
    if not csv.is_file():
        return f"{key.name}: no accuracy.csv, so its accuracy was not gated"
    table = pd.read_csv(csv)
    failed = accuracy_failures(table)
    if failed:
        return f"{key.name}: accuracy failed ({'; '.join(failed)})"
    if not table["kind"].isin(GATED_KINDS).any():
        return f"{key.name}: its accuracy.csv has no gated check"
    return None


def candidates(gpu_root: Path, budget_ms: float) -> list[dict]:
    """Each measurement's best level within the budget (online where it has one): those
    with an online sweep first (what a service runs: clients' requests batched by the
    server), then those measured offline only (client batches at a fixed concurrency);
    within each, the most inferences a second per GPU first (a deployment may span
    several). A quantized one whose accuracy did not pass is left out (accuracy_refusal)."""
    found = []
    for folder in measurements(gpu_root):
        if accuracy_refusal(folder, gpu_root):
            continue
        for scenario in SCENARIOS:
            level = _level(folder, scenario, budget_ms)
            if level:
                found.append(level)
                break
    return sorted(found, key=lambda c: (c["scenario"] != "online", -c["per_gpu"]))


def _marks(candidate: dict, every: list[dict]) -> list[str]:
    """Why a figure may not be what one gets today."""
    marks = [] if candidate["scenario"] == "online" else ["offline only"]
    if candidate["gpus"] > 1:
        marks.append(f"over {candidate['gpus']} GPUs ({candidate['per_gpu']:,.0f} inf/s a GPU)")
    if candidate["contended"]:
        marks.append("host contended")
    if not candidate["stable"]:
        marks.append("unstable")
    same_key = [c for c in every if c["folder"].name == candidate["folder"].name]
    if candidate["backend"] == "python" and any(c["backend"] == "deploybench"
                                                for c in same_key):
        marks.append("serving path superseded (the C++ backend serves this key)")
    newest = max((c for c in every if c["code"] and c["measured"]),
                 key=lambda c: c["measured"], default=None)
    if newest and candidate["code"] and candidate["code"] != newest["code"]:
        marks.append("older code")
    return marks


def _rate(folder: Path) -> str:
    path = folder / "rate.json"
    if not path.is_file():
        return "not measured"
    result = formats.read(path)
    found = result["max_rate_within_budget"]
    budget = result.get("settings", {}).get("p99_budget_ms")
    within = f" within p99 {budget:g} ms" if budget else ""
    if found.get("rate") is None or not found.get("bracketed", True):
        return f"not bracketed{within} (see its rate.json)"
    return (f"{found['rate']:g} requests/s{within} ({found['throughput']:,.0f} inferences/s, "
            f"p99 {found['p99_ms']:.3g} ms)")


def _config_link(folder: Path, gpu_root: Path) -> str:
    shipped = folder / "config.pbtxt"  # a search point keeps the one it served
    if shipped.is_file():
        return f"[config.pbtxt]({shipped.relative_to(gpu_root)})"
    if folder.parent == gpu_root:  # a configuration folder: its target builds it
        return (f"`snakemake {folder.relative_to(gpu_root.parents[2])}/model_repository` "
                "writes it (the settings: the folder's README)")
    readme = folder / "README.md"
    if readme.is_file():
        return (f"not kept (a dated set): its settings are in [its README]"
                f"({readme.relative_to(gpu_root)})")
    notes = next((p / "NOTES.md" for p in folder.parents if (p / "NOTES.md").is_file()
                  and gpu_root in p.parents), None)
    if notes:
        return (f"not kept (a dated set): how it ran is in [its NOTES]"
                f"({notes.relative_to(gpu_root)})")
    return "not kept (a dated set), nor a README of its settings"


def _served_native(folder: Path) -> str:
    offline, native = folder / "offline.csv", folder / "native.csv"
    if not offline.is_file():
        return "not measured"
    return ratio_text(configuration_headline(offline, native=native))


def _where(c: dict, root: Path) -> str:
    return str(c["folder"].relative_to(root))


def budget_of(model_settings: dict) -> float | None:
    """The p99 budget what to ship ranks by: the model's search one on the key (its merged
    settings), else its rate one; None where it sets neither."""
    return ((model_settings.get("search") or {}).get("p99_budget_ms")
            or (model_settings.get("rate") or {}).get("p99_budget_ms"))


def ship_page(title: str, gpu: str, gpu_root: Path, budget_ms: float) -> str:
    """The page: the winner, then the runners-up, from the measurements of `gpu_root`
    (results/<model>/<gpu>)."""
    gpu_root = Path(gpu_root)
    ranked = candidates(gpu_root, budget_ms)
    lines = [f"# What to ship: {title} on {gpu}, p99 within {budget_ms:g} ms", ""]
    if not ranked:
        return "\n".join(lines + [f"No level measured under {gpu_root} kept p99 within "
                                  f"{budget_ms:g} ms.", *_left_out(gpu_root), ""])
    best = ranked[0]
    marks = _marks(best, ranked)
    level = (f"concurrency {best['concurrency']}, batch {best['batch']}" if
             best["scenario"] == "online" else f"batch {best['batch']}, concurrency "
             f"{best['concurrency']}")
    lines += [
        f"**Ship `{_where(best, gpu_root)}`**: {best['throughput']:,.0f} inferences/s "
        f"({best['scenario']}, {level}, p99 {best['p99_ms']:.3g} ms)"
        + (f" — **{', '.join(marks)}**" if marks else ""), "",
        f"- **Served by**: {best['served_by']}",
        f"- **Maximum Poisson rate**: {_rate(best['folder'])}",
        f"- **Served/native**: {_served_native(best['folder'])}",
        f"- **GPU utilisation** at that level: {_number(best['gpu_util'], '%')}; "
        f"**energy per inference**: {_number(best['energy_mj'], ' mJ')}",
        f"- **Config to ship**: {_config_link(best['folder'], gpu_root)}",
        f"- **Measured**: {best['measured'] or 'unknown'}, code {best['code'] or 'unknown'}",
        "", "## Runners-up", ""]
    rows = [{"measurement": _where(c, gpu_root), "scenario": c["scenario"],
             "inf/s": round(c["throughput"]), "p99 (ms)": round(c["p99_ms"], 2),
             "batch": c["batch"], "concurrency": c["concurrency"],
             "served by": c["served_by"], "marks": ", ".join(_marks(c, ranked))}
            for c in ranked[1:1 + RUNNERS_UP]]
    lines.append(markdown_table(pd.DataFrame(rows)) if rows else "none")
    lines += _left_out(gpu_root)
    lines += ["", f"{len(ranked)} measurements have a level within the budget, each ranked "
              "by its fastest such level a GPU: those with an online sweep first (what a service "
              "runs), then those measured offline only. Marks: the level ran beside other "
              "load (host contended) or did not settle (unstable); its code is not the newest "
              "measurement's (older code); the python backend served a key the C++ backend "
              "has served since (serving path superseded)."]
    return "\n".join(lines) + "\n"


def _left_out(gpu_root: Path) -> list[str]:
    """The quantized measurements not ranked, each with why."""
    why = sorted({r for f in measurements(gpu_root) if (r := accuracy_refusal(f, gpu_root))})
    if not why:
        return []
    return ["", "## Left out: quantized, accuracy not passed", "",
            *[f"- {reason}" for reason in why]]


def _number(value, unit: str) -> str:
    if value is None or pd.isna(value):
        return "not recorded"
    return f"{float(value):.3g}{unit}"
