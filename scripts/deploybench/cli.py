"""`deploybench`: one command for what users do with the pipeline. Each subcommand prints the
command it runs (Snakemake's, or one of the project's tools under scripts/) and then runs it,
so Snakemake stays the engine and every target stays reachable without this command.

    deploybench run                                       the main job (config/config.yaml)
    deploybench run -m tft -g cpu -b onnx -p fp32         one configuration's report
    deploybench run results/tft/cpu/onnx_fp32/offline.csv -- --cores 2
    deploybench plan ...                                  the same, planned (snakemake -n)
    deploybench report                                    the HTML report (report.html)
    deploybench ship tft h100                             what to ship (results/tft/h100/SHIP.md)
    deploybench add-model mine model.onnx --range ids=0:1000   your own model, no plug-in
    deploybench archive unpack results/tft/h100           a results tool (scripts/...)

Arguments after `--` go to the command as they are.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import click
import yaml

from . import add_model as user_model
from .backends import PRECISIONS
from .reporting.ship import budget_of, ship_page
from .settings.config_files import ConfigError
from .settings.resolve import settings_of

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# subcommand -> (the tool under scripts/, what it does): the machine and results tools
TOOLS = {
    "archive": ("results_tools/results_archive.py", "pack or unpack a results/<model>/<gpu>/ "
                "folder's logs and history copies (logs-and-history.tar.xz)"),
    "assemble": ("results_tools/assemble_configuration.py", "a configuration folder's plots "
                 "and README from runs made on several machines"),
    "pack-offline": ("machines/pack_offline.py", "pack what an offline GPU machine lacks into "
                     "a .tar.xz bundle (and onnxruntime-gpu's, tensorflow's)"),
    "offline-run": ("machines/offline_run.sh", "run the pipeline on an offline GPU machine "
                    "from the bundle of pack-offline"),
    "lanes": ("machines/gpu_lanes.sh", "one lent-machine call: a lanes file's runs side by "
              "side, one lane a GPU"),
}
BENCHMARKS_DIR = SCRIPTS / "benchmarks"
BENCHMARKS = sorted(p.stem.removeprefix("bench_") for p in BENCHMARKS_DIR.glob("bench_*.py"))
PASS_ON = {"ignore_unknown_options": True, "allow_extra_args": True}


def _run(command: list[str]) -> None:
    """Print the command, run it here, and exit with its status."""
    click.echo("+ " + shlex.join(command), err=True)
    sys.exit(subprocess.call(command, cwd=os.getcwd()))


def _snakemake() -> str:
    """The environment's snakemake, beside this Python (the one the set-up installed)."""
    beside = Path(sys.executable).with_name("snakemake")
    return str(beside) if beside.is_file() else "snakemake"


def snakemake_command(targets: tuple[str, ...], model: str | None, gpu: str | None,
                      backend: str | None, precision: str | None,
                      configfiles: tuple[str, ...], extra: tuple[str, ...],
                      plan: bool) -> list[str]:
    """The snakemake command for a subcommand's targets, a key's four parts checked against
    the configuration first (an unknown value is refused naming the valid ones)."""
    parts = {"model": model, "gpu": gpu, "backend": backend, "precision": precision}
    given = {k: v for k, v in parts.items() if v is not None}
    targets = list(targets)
    if given:
        missing = [f"--{k}" for k, v in parts.items() if v is None]
        if missing:
            raise click.UsageError(f"a configuration needs all four of --model, --gpu, "
                                   f"--backend and --precision; missing {', '.join(missing)}")
        try:
            settings_of(configfiles).check_key(model, gpu, backend, precision)
        except ConfigError as err:
            raise click.UsageError(str(err)) from err
        targets.append(f"results/{model}/{gpu}/{backend}_{precision}/README.md")
    command = [_snakemake(), *targets]
    if configfiles:
        command += ["--configfile", *configfiles]
    if plan:
        command.append("-n")
    return command + list(extra)


def _target_options(function):
    for option in reversed([
        click.argument("targets", nargs=-1),
        click.option("-m", "--model", help="a model of config/config.yaml (tft, bert, ...)"),
        click.option("-g", "--gpu", help="a GPU key of config/gpus.yaml (cpu, h100, ...)"),
        click.option("-b", "--backend", help="a backend key (onnx, ts-trace, aoti, ...)"),
        click.option("-p", "--precision", help=f"{', '.join(PRECISIONS)} (a key's GPU "
                                                    "key and format say which it runs)"),
        click.option("-c", "--configfile", "configfiles", multiple=True,
                     help="a run file (config/runs/...), merged over config/config.yaml; "
                          "repeatable"),
    ]):
        function = option(function)
    return function


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Triton deployment benchmarks as a Snakemake pipeline: each subcommand prints the
    command it runs, then runs it."""


@main.command(context_settings=PASS_ON)
@_target_options
@click.pass_context
def run(ctx, targets, model, gpu, backend, precision, configfiles):
    """Build targets: files, one configuration (-m -g -b -p: its report), or, given
    nothing, the main job (the configuration's default targets)."""
    _run(snakemake_command(targets, model, gpu, backend, precision, configfiles,
                           tuple(ctx.args), plan=False))


@main.command(context_settings=PASS_ON)
@_target_options
@click.pass_context
def plan(ctx, targets, model, gpu, backend, precision, configfiles):
    """What `run` with the same arguments would build, and why (snakemake -n)."""
    _run(snakemake_command(targets, model, gpu, backend, precision, configfiles,
                           tuple(ctx.args), plan=True))


@main.command(context_settings=PASS_ON)
@click.option("--html", default="report.html", show_default=True,
              help="the report's file (.html, or .zip for a report with its files)")
@click.option("-c", "--configfile", "configfiles", multiple=True, help="a run file")
@click.pass_context
def report(ctx, html, configfiles):
    """Snakemake's HTML report of what the pipeline built (also of a partly built one)."""
    command = [_snakemake(), "--report", html]
    if configfiles:
        command += ["--configfile", *configfiles]
    _run(command + list(ctx.args))


@main.command()
@click.argument("model")
@click.argument("gpu")
@click.option("--p99", type=float, help="the latency budget in ms (default: the model's "
              "search or rate p99_budget_ms)")
@click.option("--results", default="results", show_default=True, type=click.Path(),
              help="the results tree")
@click.option("--write/--no-write", default=True, show_default=True,
              help="write the page to RESULTS/MODEL/GPU/SHIP.md")
def ship(model, gpu, p99, results, write):
    """What to ship for MODEL on GPU: of every measurement there, the one serving the most
    within the p99 budget, and the runners-up; written to RESULTS/MODEL/GPU/SHIP.md and
    printed."""
    try:
        # the GPU key's overrides merged in; an unknown model or key refused by name
        config = settings_of().model_settings(model, gpu)
    except ConfigError as err:
        raise click.UsageError(str(err)) from err
    budget = p99 or budget_of(config)
    if not budget:
        raise click.UsageError(f"model '{model}' sets no p99 budget on {gpu} (search or rate "
                               "p99_budget_ms): give one with --p99 MS")
    root = Path(results) / model / gpu
    if not root.is_dir():
        raise click.UsageError(f"nothing measured for {model} on {gpu}: {root} is not there")
    page = ship_page(config.get("title", model), gpu, root, float(budget))
    if write:
        (root / "SHIP.md").write_text(page)
    click.echo(page, nl=False)


@main.command("add-model")
@click.argument("name")
@click.argument("artifact", type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(sorted(user_model.BACKENDS)),
              help="its format (default: from the file's suffix or the folder's files)")
@click.option("--input", "inputs", multiple=True, metavar="NAME:DTYPE:DIMS",
              help="an input the file cannot describe (TorchScript), dims after the batch")
@click.option("--range", "ranges", multiple=True, metavar="NAME=LOW:HIGH",
              help="an integer input's generated values, in [LOW, HIGH)")
@click.option("--data", type=click.Path(exists=True, dir_okay=False),
              help="your samples: an .npz with an array per input name")
@click.option("--max-batch", default=32, show_default=True,
              help="Triton's max_batch_size (a repository's: its config's, or less for the "
                   "sweep)")
@click.option("--models-dir", default="config/models", show_default=True,
              type=click.Path(file_okay=False), help="where the model config goes")
@click.option("--p99", "p99", default=100.0, show_default=True, metavar="MS",
              help="the p99 budget (ms) of its rate scenario and of what to ship")
@click.option("--source", type=click.Path(exists=True),
              help="a Triton repository's source model (a model file or SavedModel) that "
                   "its accuracy step compares the served outputs with")
@click.option("--trust-python", is_flag=True,
              help="serve a python-backend repository model as it is (its model.py runs "
                   "in the server)")
@click.option("--force", is_flag=True, help="replace a model config of that name")
def add_model(name, artifact, fmt, inputs, ranges, data, max_batch, models_dir, p99, source,
              trust_python, force):
    """Your own model (an ONNX, TorchScript or torch.export .pt2 file, a TensorFlow
    SavedModel folder, or a Triton model repository's model folder) as a model of the
    pipeline, without a plug-in: writes MODELS_DIR/NAME.yaml from its tensors; then
    `deploybench run -m NAME -g cpu -b BACKEND -p fp32` builds and measures it. Without
    --data, samples generated from the tensor specs go to MODELS_DIR/NAME.npz."""
    out = Path(models_dir) / f"{name}.yaml"
    if out.exists() and not force:
        raise click.UsageError(f"{out} exists: --force replaces it")
    out.parent.mkdir(parents=True, exist_ok=True)
    samples = out.with_suffix(".npz")  # generated samples, beside the config
    try:
        config = user_model.model_config(
            name, Path(artifact), fmt, list(inputs), list(ranges), Path(data) if data else None,
            max_batch, samples, p99, Path(source) if source else None, trust_python)
    except user_model.Refused as err:
        raise click.UsageError(str(err)) from err
    hparams = config["hparams"]
    out.write_text(f"# {name}: written by `deploybench add-model` from {hparams['artifact']}\n"
                   + yaml.safe_dump(config, sort_keys=False))
    click.echo(f"{out}: {len(config['inputs'])} inputs, {len(config['outputs'])} outputs, "
               f"backends {', '.join(config['backends'])}")
    if "served_by" in hparams:  # a repository's model, served as it is
        click.echo(f"served as it is by Triton's '{hparams['served_by']}' backend (version "
                   f"{hparams['version']}); accuracy "
                   + (f"against {hparams['source']['artifact']}" if hparams["source"] else
                      "not measured: no --source model to compare with"))
    click.echo(f"next: deploybench run -m {name} -g cpu -b {config['backends'][0]} -p fp32")


def _tool(name: str, script: str, what: str) -> None:
    @main.command(name=name, context_settings={**PASS_ON, "help_option_names": []},
                  help=f"{what[0].upper()}{what[1:]} (scripts/{script}; its own --help says "
                       "how).", add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def tool(args):
        runner = ["bash"] if script.endswith(".sh") else [sys.executable]
        _run([*runner, str(SCRIPTS / script), *args])


for _name, (_script, _what) in TOOLS.items():
    _tool(_name, _script, _what)


@main.command(context_settings={**PASS_ON, "help_option_names": []}, add_help_option=False)
@click.argument("name", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(name, args):
    """A benchmark of scripts/benchmarks/bench_NAME.py, which prints ratios (no NAME: the
    list)."""
    if name is None or name in ("-h", "--help"):
        click.echo("benchmarks: " + ", ".join(BENCHMARKS))
        return
    if name not in BENCHMARKS:
        raise click.UsageError(f"no benchmark '{name}'; valid: {', '.join(BENCHMARKS)}")
    _run([sys.executable, str(BENCHMARKS_DIR / f"bench_{name}.py"), *args])


if __name__ == "__main__":
    main()
