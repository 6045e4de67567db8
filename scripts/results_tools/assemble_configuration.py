"""A configuration's plots and README built from what its folder holds: for a folder put
together from runs on several machines (scripts/machines/gpu_lanes.sh runs a configuration whose
scenarios outlast one lent machine as runs of their own, e.g. FastPitch's offline and
online), the pages the configuration_report rule builds, a scenario whose files are not
there yet said to be missing.

    python scripts/results_tools/assemble_configuration.py FOLDER [--configfile FILE...] \
        [--from RESULTS...]

FOLDER: results/<model>/<gpu>/<backend>_<precision>, or one kept in a dated set, holding what
every run of it writes (conversion_check.csv, accuracy.csv, offline.csv and offline.json)
and any of the other scenarios' tables and JSONs (online, native, floor, rate);
--configfile: the run files the runs were made with, in order; --from: the runs' results
folders (a lanes.tar run's results.tgz, unpacked), whose files of the same configuration
are copied into FOLDER first: each measured step's (its table, JSON, logs, benchmark and
history copies) from the one run that measured it, the build's (conversion check,
accuracy, conversion, repository) from the first run that has them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from deploybench.records import atomic, formats, layout
from deploybench.reporting.configuration_report import configuration_page
from deploybench.settings.config_files import ConfigError
from deploybench.settings.resolve import settings_of
from deploybench.settings.run_facts import serves_online
from deploybench.settings.scenarios import own_server, serves_rate
from deploybench.source import model as source_model
from deploybench.steps import report

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = ("conversion_check.csv", "accuracy.csv", "offline.csv", "offline.json")
# A scenario's files: in the folder together or not at all
SCENARIOS = {"online": ("online.csv", "online.json"), "native": ("native.csv", "native.json"),
             "floor": ("floor.csv",), "rate": ("rate.csv", "rate.json")}


# Steps whose files come from the one run that measured them, and the build's steps, which
# every run of a configuration repeats (taken from the first run that has them)
MEASURED = ("offline", *SCENARIOS)
BUILT = ("conversion_check", "accuracy", "model_repository", "convert_model.*")


def _files(folder: Path, step: str) -> list[Path]:
    """A step's files in a configuration folder: table, JSON, logs (its own, its server's,
    perf_analyzer's), benchmark and history copies."""
    patterns = (f"{step}.csv", f"{step}.json", f"logs/{step}.log", f"logs/{step}_server.log",
                f"logs/{step}_perf_analyzer.log", f"benchmarks/{step}.tsv", f"history/{step}-*")
    return sorted(path for pattern in patterns for path in folder.glob(pattern))


def gather(folder: Path, runs: list[Path]) -> list[Path]:
    """Copy into `folder` its configuration's files from the runs' results folders; returns
    what was copied. Refuses, before copying anything, a run without the configuration
    and a step that two runs measured."""
    where = layout.configuration_of(folder)
    sources = [Path(run) / where["model"] / where["gpu"] / where["name"] for run in runs]
    for source in sources:
        if not source.is_dir():
            raise ConfigError(f"{source} is not there: --from takes a run's results folder, "
                              f"which holds {where['model']}/{where['gpu']}/{where['name']}")
    chosen = {}
    for step in MEASURED:
        having = [s for s in sources if (s / f"{step}.csv").is_file()]
        if len(having) > 1:
            raise ConfigError(f"{step} was measured by {having[0]} and by {having[1]}: "
                              "name the runs of one measurement of each step")
        chosen |= {step: having[0]} if having else {}
    for step in BUILT:
        having = [s for s in sources if _files(s, step)]
        chosen |= {step: having[0]} if having else {}
    copied = []
    folder.mkdir(parents=True, exist_ok=True)
    for step, source in chosen.items():
        for path in _files(source, step):
            target = folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied.append(target)
    return copied


def _present(folder: Path) -> dict[str, bool]:
    """Which scenarios the folder holds; refuses one with only some of its files, and a
    folder without what every run writes."""
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise ConfigError(f"{folder} lacks {', '.join(missing)}: every run of a configuration "
                          f"writes {', '.join(REQUIRED)}; copy them in from one of its runs")
    present = {}
    for scenario, names in SCENARIOS.items():
        found = [name for name in names if (folder / name).is_file()]
        if found and len(found) < len(names):
            raise ConfigError(f"{folder} holds {found[0]} but not "
                              f"{', '.join(n for n in names if n not in found)}: a scenario's "
                              f"files ({', '.join(names)}) come from one run, copy them together")
        present[scenario] = bool(found)
    return present


def _key(folder: Path) -> dict[str, str]:
    """The folder's configuration key, checked against what its offline run recorded."""
    where = layout.configuration_of(folder)
    key = {name: where[name] for name in ("model", "gpu", "backend", "precision")}
    ran = formats.read(folder / "offline.json")["provenance"]["key"]
    if ran != key:
        raise ConfigError(f"{folder}/offline.json was measured for "
                          f"{'/'.join(ran.get(name, '?') for name in key)}, "
                          f"not the folder's {'/'.join(key.values())}")
    return key


def assemble(folder: Path, configfiles: list[str]) -> Path:
    """The folder's plots and README.md; returns the README's path."""
    folder = Path(folder)
    present = _present(folder)
    key = _key(folder)
    model = key["model"]
    settings = settings_of(configfiles, ROOT)
    run = settings.run(**key)
    f = {name: folder / name for names in SCENARIOS.values() for name in names}
    plots = folder / "plots"
    report.plots(key, folder / "offline.csv", plots / "offline_throughput.png",
                 plots / "offline_latency.png")
    online = present["online"] and serves_online(run)
    if online:
        report.online_plot(key, f["online.csv"], f["online.json"],
                           plots / "online_latency.png", plots / "online_tail.png")
    rate = present["rate"] and serves_rate(run)
    if rate:
        report.rate_plot(key, f["rate.csv"], f["rate.json"], plots / "rate_latency.png")
    native = present["native"] and own_server(run)
    out = folder / layout.CONFIGURATION_REPORT
    page = configuration_page(
        run, settings.dataset(model),
        source_model.describe_weights(settings.export_settings(model)), out,
        conversion_check=folder / "conversion_check.csv", accuracy=folder / "accuracy.csv",
        offline=folder / "offline.csv", offline_json=folder / "offline.json",
        offline_throughput=plots / "offline_throughput.png",
        offline_latency=plots / "offline_latency.png",
        online=f["online.csv"] if online else [], online_json=f["online.json"] if online else [],
        online_latency=plots / "online_latency.png" if online else [],
        online_tail=plots / "online_tail.png" if online else [],
        native=f["native.csv"] if native else [], native_json=f["native.json"] if native else [],
        floor=f["floor.csv"] if present["floor"] and own_server(run) else [],
        rate=f["rate.csv"] if rate else [], rate_json=f["rate.json"] if rate else [],
        rate_latency=plots / "rate_latency.png" if rate else [])
    with atomic.output(out) as tmp:
        tmp.write_text(page)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a configuration folder")
    parser.add_argument("--configfile", nargs="*", default=[],
                        help="the run files its runs were made with, in order")
    parser.add_argument("--from", dest="runs", nargs="*", default=[], type=Path,
                        help="the runs' results folders, copied in first")
    args = parser.parse_args()
    try:
        if args.runs:
            print(f"{len(gather(args.folder, args.runs))} files copied in")
        print(assemble(args.folder, args.configfile))
    except ConfigError as err:
        sys.exit(f"assemble_configuration.py: {err}")


if __name__ == "__main__":
    main()
