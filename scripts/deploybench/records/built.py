"""What a run built and where to look: the lines a run ends with (the Snakefile's onsuccess
and onerror), naming the model and configuration reports it was asked for, whether each
exists, and the command for the HTML report of what exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ..backends import PRECISIONS
from . import layout

_CONFIGURATION = re.compile(
    r"^results/(?P<model>[^/]+)/(?P<gpu>[^/]+)/(?P<backend>[^/]+)_"
    rf"(?P<precision>{'|'.join(PRECISIONS)})(/|$)")
_MODEL = re.compile(r"^results/(?P<model>[^/]+)/(README|compare)\.(md|html)$")


def reports(targets: list[str]) -> tuple[list[str], list[str]]:
    """The model reports and the configuration reports (markdown) of a run's targets: a
    target inside a configuration's folder stands for that configuration."""
    models, configurations = [], []
    for target in targets:
        if match := _MODEL.match(target):
            path = layout.fill(layout.MODEL_REPORT, model=match["model"])
            models += [path] if path not in models else []
        elif match := _CONFIGURATION.match(target):
            folder = layout.fill(layout.CONFIGURATION, **match.groupdict())
            path = f"{folder}/{layout.CONFIGURATION_REPORT}"
            configurations += [path] if path not in configurations else []
    return models, configurations


def summary(targets: list[str], workdir: Path, report_args: list[str],
            failed: bool = False) -> str:
    """The lines that end a run: each report asked for, built or not, and the HTML report's
    command (`report_args`: the run's configuration files and targets, which it needs to
    list the same reports)."""
    models, configurations = reports(targets)
    built = [p for p in models + configurations if (workdir / p).is_file()]
    lines = ["", f"deploybench: {len(built)} of {len(models) + len(configurations)} reports "
             f"asked for are built{' (the run stopped at a failed job)' if failed else ''}"]
    for title, paths in (("Model reports (every configuration compared)", models),
                         ("Configuration reports", configurations)):
        if paths:
            lines.append(f"  {title}:")
        for path in paths:
            missing = f"   not built: see {Path(path).parent}/logs/"
            lines.append(f"    {path}{'' if path in built else missing}")
    command = shlex.join(["snakemake", "--report", "report.html", *report_args])
    lines.append(f"  The HTML report of what is built (plots, tables, provenance): {command}")
    return "\n".join(lines)
