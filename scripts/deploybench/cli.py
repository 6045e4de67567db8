"""Command line of the pipeline steps: `python -m deploybench <step> --spec JSON ...`.

Snakemake rules call these (an argument marked `?` is optional); `--spec` is the
resolved settings of the step (from `config.Settings`), passed by the rule's `params:` so
that a change to any of them re-runs exactly the jobs that depend on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

STEPS: dict[str, list[str]] = {
    "weights": ["out"],
    "data": ["out"],
    "eval": ["weights", "data", "out"],
    "perf-data": ["eval", "out"],
    "export": ["format", "weights", "eval", "out"],
    "convert": ["exported", "out", "sparse?"],
    "sparse": ["weights", "data", "out"],
    "check": ["converted", "eval", "out"],
    "repository": ["artifact", "check", "out"],
    "native": ["converted", "eval", "out"],
    "accuracy": ["config", "eval", "out", "report", "server_log"],
    "offline": ["config", "data", "accuracy", "out", "report", "log", "server_log"],
    "online": ["config", "data", "accuracy", "out", "report", "log", "server_log"],
    "plots": ["offline", "online", "offline_throughput", "offline_latency", "online_latency"],
    "report": ["check", "accuracy", "offline", "online", "offline_json", "online_json",
               "offline_throughput", "offline_latency", "online_latency", "native", "weights",
               "out"],
    "model-report": ["out", "configs"],
}


def _run(step: str, spec: dict, a: argparse.Namespace) -> None:
    # Imports per step keep each job's start-up light (plots need no torch, and so on).
    names = [n.rstrip("?") for n in STEPS[step]]
    p = {k: Path(v) for k, v in vars(a).items() if k in names and isinstance(v, str)}
    if step == "weights":
        from .source import make_weights

        make_weights(spec, p["out"])
    elif step == "data":
        from .source import generate_data

        generate_data(spec, p["out"])
    elif step == "eval":
        from .source import make_eval

        make_eval(spec, p["weights"], p["data"], p["out"])
    elif step == "perf-data":
        from .source import make_perf_data

        make_perf_data(spec, p["eval"], p["out"])
    elif step == "export":
        from .export import export

        export(spec, a.format, p["weights"], p["eval"], p["out"])
    elif step == "convert":
        from .convert import convert

        convert(spec, p["exported"], p["out"], p.get("sparse"))
    elif step == "sparse":
        from .ensemble import export_sparse

        export_sparse(spec, p["weights"], p["data"], p["out"])
    elif step == "check":
        from .check import run_check

        print(run_check(spec, p["converted"], p["eval"], p["out"]).to_string(index=False))
    elif step == "native":
        from .native import measure

        print(measure(spec, p["converted"], p["eval"], p["out"]).to_string(index=False))
    elif step == "repository":
        from .check import require_passed
        from .repository import create
        from .serving import runtime_for

        require_passed(p["check"])
        served = create(spec, p["artifact"], p["out"], runtime_for(spec).backends)
        print(f"served by Triton's {served} backend")
    elif step == "accuracy":
        from .serving import accuracy

        table = accuracy(spec, p["config"], p["eval"], p["out"], p["report"], p["server_log"])
        print(table.to_string(index=False))
    elif step in ("offline", "online"):
        from .serving import performance, require_accurate

        require_accurate(p["accuracy"])
        table = performance(spec, step, p["config"], p["data"], p["out"], p["report"],
                            p["log"], p["server_log"])
        print(table.to_string(index=False))
    elif step == "plots":
        from . import plots

        title = f"{spec['model']} {spec['gpu']} {spec['backend']} {spec['precision']}"
        plots.offline(p["offline"], title, p["offline_throughput"], p["offline_latency"])
        plots.online(p["online"], title, p["online_latency"])
    elif step == "report":
        from .report import configuration_readme
        from .source import weights_origin

        files = {k: v for k, v in p.items() if k not in ("out", "weights")}
        files["weights_origin"] = weights_origin(p["weights"])
        files["dataset"] = spec["dataset"]
        configuration_readme(spec["run"], files, p["out"])
    elif step == "model-report":
        from .report import model_readme

        built = set(p["out"].parent.glob("*/*/README.md")) | {Path(c) for c in a.configs}
        model_readme(spec["title"], spec["model"], sorted(built), p["out"],
                     spec.get("reference"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploybench")
    sub = parser.add_subparsers(dest="step", required=True)
    for step, args in STEPS.items():
        sp = sub.add_parser(step)
        sp.add_argument("--spec", required=True, help="resolved settings of the step (JSON)")
        for arg in args:
            flag = "--" + arg.rstrip("?").replace("_", "-")
            if arg.endswith("?"):  # optional
                sp.add_argument(flag, default=None)
            elif arg == "configs":
                sp.add_argument(flag, nargs="*", default=[])
            else:
                sp.add_argument(flag, required=True)
    a = parser.parse_args(argv)
    try:
        _run(a.step, json.loads(a.spec), a)
    except Exception as err:  # one clear line for the log, the traceback above it
        import traceback

        traceback.print_exc()
        print(f"deploybench {a.step}: error: {err}", file=sys.stderr)
        return 1
    return 0
