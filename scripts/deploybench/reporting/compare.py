"""Regression reports: a configuration's current measurements against a baseline
(deploybench.records.baseline), level by level, a change counted only beyond the measured noise,
with what differs in what they ran on; and one report per model summarising them.

Noise, per side and level: the larger of the stability criterion the runs used
(perf_analyzer's stability_percentage: its last windows agree within it) and, with
perf.repeats, the distance from the median to either end of its 95 % interval, in % of
the value. A metric changed when the two sides' ranges (value ± noise) do not overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..records import baseline, facts, formats, layout
from ..records.tables import (
    DEVICE_THROUGHPUT,
    SHARED_MEMORY,
    STABLE,
    THROUGHPUT,
    WINDOW_SPREAD,
    read_perf,
)
from .markdown import PERF_ANALYZER_STABILITY

LEVEL = {"offline": ["Batch", "Concurrency", SHARED_MEMORY],
         "online": ["Batch", "Concurrency", SHARED_MEMORY], "native": ["Batch"]}
# metric -> +1 where higher is better, -1 where lower is; None: shown, never judged
# (perf_analyzer stabilises throughput and the average latency, not p99)
METRICS = {"offline": {THROUGHPUT: 1, "avg latency (ms)": -1, "p99 latency (ms)": None},
           "native": {THROUGHPUT: 1, "median latency (ms)": -1, DEVICE_THROUGHPUT: 1}}
METRICS["online"] = METRICS["offline"]
VERDICTS = ("faster", "slower", "mixed", "unchanged", "added", "removed")
NOISE = "noise ± % (baseline, current)"
# provenance fields that name places, not what ran, or change with every run
NOT_COMPARED = ("date", "device_lock", "server.tritonserver", "server.backend_directory",
                "server.perf_analyzer", "server.launcher")


def changed(base: float, current: float, base_noise: float, current_noise: float) -> int:
    """+1 where `current` is above `base` beyond both sides' noise (in %), -1 below it,
    0 where their ranges overlap."""
    if current * (1 - current_noise / 100) > base * (1 + base_noise / 100):
        return 1
    if current * (1 + current_noise / 100) < base * (1 - base_noise / 100):
        return -1
    return 0


def noise(report: dict, level: dict, value: float, stability: float | None = None) -> float:
    """A level's noise in % of `value`: the larger of the stability criterion its runs
    used (`stability` where the report has none: native) and its repeats' 95 % interval."""
    settings = report.get("perf_analyzer_settings", {})
    pct = float(settings.get("stability_percentage", stability or PERF_ANALYZER_STABILITY))
    for entry in report.get("repeats", []):
        if facts.of_level(entry, level) and value > 0:
            low, high = entry["ci95"]
            pct = max(pct, (value - low) / value * 100, (high - value) / value * 100)
    return round(pct, 2)


def _read(scenario: str, csv: Path) -> pd.DataFrame:
    table = pd.read_csv(csv) if scenario == "native" else read_perf(csv)
    keep = [c for c in [*LEVEL[scenario], *METRICS[scenario], STABLE, WINDOW_SPREAD]
            if c in table]
    return table[keep]


def _unstable_noise(row: pd.Series, suffix: str, noise_pct: float) -> tuple[float, bool]:
    """A side's noise widened to its window spread where its level did not stabilise
    (perf.on_unstable: record), and whether it did not."""
    stable = row.get(f"{STABLE} {suffix}")
    if stable is None or pd.isna(stable) or bool(stable):
        return noise_pct, False
    spread = row.get(f"{WINDOW_SPREAD} {suffix}")
    return (noise_pct if pd.isna(spread) else max(noise_pct, float(spread))), True


@dataclass
class Scenario:
    """One scenario's comparison: its table (None without a baseline) and counts."""

    name: str
    current: baseline.Measurement | None
    base: baseline.Measurement | None
    table: pd.DataFrame | None = None
    counts: dict = field(default_factory=dict)
    contended: int = 0
    current_report: dict = field(default_factory=dict)
    base_report: dict = field(default_factory=dict)


def compare_scenario(name: str, current: baseline.Measurement | None,
                     base: baseline.Measurement | None,
                     stability: float | None = None) -> Scenario:
    """Every level of both sides: values, change in %, each side's noise and the verdict
    (faster, slower, mixed, unchanged; added or removed where one side lacks the level).
    `stability`: the criterion for a side whose report has none (native)."""
    result = Scenario(name, current, base)
    if current is None or base is None:
        return result
    reports = [formats.read(m.json) for m in (base, current)]
    result.base_report, result.current_report = reports
    keys = LEVEL[name]
    tables = [_read(name, m.csv) for m in (base, current)]
    merged = tables[0].merge(tables[1], on=keys, how="outer", suffixes=(" base", " now"),
                             indicator=True).sort_values(keys)
    rows = []
    for _, row in merged.iterrows():
        level = {k: row[k] for k in keys}
        out = {k: (int(v) if isinstance(v, float) else v) for k, v in level.items()}
        verdict, contended = _verdict(name, row, level, reports, out, stability)
        out["verdict"], out["contended"] = verdict, contended
        out["unstable"] = ", ".join(
            side for side, suffix in (("baseline", "base"), ("current", "now"))
            if _unstable_noise(row, suffix, 0.0)[1])
        rows.append(out)
        result.counts[verdict] = result.counts.get(verdict, 0) + 1
        result.contended += bool(contended)
    order = [*keys, *(f"{_short(m)} {part}" for m in METRICS[name]
                      for part in ("baseline", "current", "change")), NOISE, "verdict",
             "contended", "unstable"]
    table = pd.DataFrame(rows)
    result.table = table[[c for c in order if c in table]]
    return result


def _verdict(name: str, row: pd.Series, level: dict, reports: list[dict], out: dict,
             stability: float | None) -> tuple[str, str]:
    """Fills `out` with the level's values, changes and noise; its verdict, and which
    sides ran beside other load."""
    sides = {"both": ("baseline", "current"), "left_only": ("baseline",),
             "right_only": ("current",)}[row["_merge"]]
    contended = ", ".join(side for side, report in zip(("baseline", "current"), reports)
                          if side in sides and facts.contended(report, level))
    if row["_merge"] != "both":
        for metric in METRICS[name]:
            for side, suffix in (("baseline", "base"), ("current", "now")):
                if not pd.isna(row.get(f"{metric} {suffix}")):
                    out[f"{_short(metric)} {side}"] = row[f"{metric} {suffix}"]
        return ("removed" if row["_merge"] == "left_only" else "added"), contended
    throughput = [row.get(f"{THROUGHPUT} {suffix}") for suffix in ("base", "now")]
    noises = [_unstable_noise(row, suffix, noise(report, level, value, stability))[0]
              for report, value, suffix in zip(reports, throughput, ("base", "now"))]
    better = set()
    for metric, sign in METRICS[name].items():
        base, now = row.get(f"{metric} base"), row.get(f"{metric} now")
        if pd.isna(base) and pd.isna(now):  # e.g. no device-resident figure on a CPU
            continue
        short = _short(metric)
        out[f"{short} baseline"], out[f"{short} current"] = base, now
        comparable = not (pd.isna(base) or pd.isna(now)) and base > 0
        out[f"{short} change"] = f"{(now / base - 1) * 100:+.1f} %" if comparable else ""
        if comparable and sign is not None:
            better.add(sign * changed(base, now, *noises))
    out[NOISE] = f"{noises[0]:g}, {noises[1]:g}"
    better.discard(0)
    verdict = ("mixed" if len(better) > 1 else "faster" if better == {1}
               else "slower" if better == {-1} else "unchanged")
    return verdict, contended


def _short(metric: str) -> str:
    return {THROUGHPUT: "inf/s", DEVICE_THROUGHPUT: "device-resident inf/s",
            "avg latency (ms)": "avg ms", "p99 latency (ms)": "p99 ms",
            "median latency (ms)": "median ms"}[metric]


def _flatten(value, prefix: str = "") -> dict[str, str]:
    """A provenance as `a.b[0].c` -> value text."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items()
                for k, v in _flatten(item, f"{prefix}.{key}" if prefix else str(key)).items()}
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return {k: v for i, item in enumerate(value)
                for k, v in _flatten(item, f"{prefix}[{i}]").items()}
    if isinstance(value, list):
        return {prefix: ", ".join(str(v) for v in value)}
    return {prefix: "" if value is None else str(value)}


def differences(base: dict, current: dict, ignored: tuple[str, ...] = ()) -> dict:
    """field -> (baseline, current) where two flattened records differ ("not recorded"
    where one has no such field)."""
    a, b = _flatten(base), _flatten(current)
    return {k: (a.get(k, "not recorded"), b.get(k, "not recorded"))
            for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k) and not k.startswith(ignored)}


def package_changes(base_sha: str, current_sha: str, root: Path = Path(".")) -> list[str]:
    """What differs between two installed-package lists (results/packages/<hash>.txt):
    `name old -> new`, `name added`/`removed`; a line saying which list is missing."""
    lists = {}
    for sha in (base_sha, current_sha):
        path = root / layout.fill(layout.PACKAGES, sha=sha)
        if not path.is_file():
            return [f"package list `{path}` not found: the lists cannot be compared"]
        lists[sha] = dict(line.split("==", 1) for line in path.read_text().splitlines()
                          if "==" in line)
    old, new = lists[base_sha], lists[current_sha]
    return ([f"{n} {old[n]} → {new[n]}" for n in sorted(old.keys() & new.keys(),
                                                       key=str.lower) if old[n] != new[n]]
            + [f"{n} {new[n]} added" for n in sorted(new.keys() - old.keys(), key=str.lower)]
            + [f"{n} {old[n]} removed" for n in sorted(old.keys() - new.keys(),
                                                       key=str.lower)])


@dataclass
class Comparison:
    """A configuration's comparison: its scenarios, and what differs between the sides
    (field -> (baseline, current) -> the scenarios where it does)."""

    setting: str
    scenarios: list[Scenario]
    provenance: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    packages: list[str] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(s.counts.get(verdict, 0) for s in self.scenarios)


def compare_configuration(folder: Path, setting: str) -> Comparison:
    """Every scenario of the configuration in `folder` against the baseline `setting`."""
    folder = Path(folder)
    return compare_measurements(
        {name: baseline.current(folder, name) for name in baseline.SCENARIOS},
        {name: baseline.find(folder, name, setting) for name in baseline.SCENARIOS}, setting)


def compare_given(given: dict[str, tuple[Path, Path] | None], setting: str,
                  files: list[Path]) -> Comparison:
    """Every scenario of a configuration as a step is given it (scenario -> its table and
    JSON, None where not measured) against the baseline `setting`: their history copies
    beside them, or `files`, a folder baseline's (baseline.folder_files)."""
    current = {name: baseline.measured(*given[name]) if given.get(name) else None
               for name in baseline.SCENARIOS}
    return compare_measurements(
        current, {name: baseline.given(name, current[name], setting, files)
                  for name in baseline.SCENARIOS}, setting)


def compare_measurements(current: dict[str, baseline.Measurement | None],
                         bases: dict[str, baseline.Measurement | None],
                         setting: str) -> Comparison:
    """Each scenario's current measurement against its baseline (None: none), and what
    differs in what they ran on."""
    offline = current["offline"]
    # native's criterion: the offline scenario's (else perf_analyzer's own)
    stability = (formats.read(offline.json)["perf_analyzer_settings"].get(
        "stability_percentage", PERF_ANALYZER_STABILITY) if offline else PERF_ANALYZER_STABILITY)
    scenarios = [compare_scenario(name, current[name], bases[name], stability)
                 for name in baseline.SCENARIOS]
    result = Comparison(setting, scenarios)
    lists = {}  # (baseline, current) package list hashes -> the scenarios of that pair
    for s in scenarios:
        if s.table is None:
            continue
        base, now = s.base_report.get("provenance", {}), s.current_report.get("provenance", {})
        for what, values in differences(base, now, NOT_COMPARED).items():
            result.provenance.setdefault(what, {}).setdefault(values, []).append(s.name)
        ran = [{k: r[k] for k in ("perf_analyzer_settings", "triton", "min_seconds")
                if k in r} for r in (s.base_report, s.current_report)]
        for what, values in differences(*ran).items():
            result.settings.setdefault(what, {}).setdefault(values, []).append(s.name)
        shas = (base.get("installed_packages"), now.get("installed_packages"))
        if shas[0] != shas[1]:  # one side without a list (older runs) is a difference too
            lists.setdefault(shas, []).append(s.name)
    result.packages = [f"{line} ({', '.join(names)})" for shas, names in lists.items()
                       for line in (package_changes(*shas) if all(shas) else [
                           f"the {side} recorded no package list" for side, sha
                           in zip(("baseline", "current measurement"), shas) if not sha])]
    return result
