"""Triton model repositories on disk: a model's folder, what the python backend loads, and
a scenario's copy of a repository.

    <repository>/<model>/config.pbtxt
    <repository>/<model>/1/<artifact>             the served model file (or folder)
    <repository>/<model>/1/model.py               python backend: a file of deploybench.served
    <repository>/<model>/1/deploybench_runners/   ... and the runners it imports

Who serves a build: the pipeline's own C++ backend (`deploybench`: libtorch in the server's
process, deploybench.triton.cpp_backend) for the PyTorch formats it serves, where the
server's backend directory has it (the embedded one does, where it could be built); else
the framework backend of its format (onnxruntime, tensorrt, pytorch, tensorflow) where the
server has it; else the python backend running served/python_model.py over the same
artifact. `server.serve_with` (auto | deploybench | framework | python) overrides the
choice. A user's own Triton model folder (`deploybench add-model`) is served as it is, by
the backend its config.pbtxt names (serve_as_is).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from ..records.files import copy_artifact, link_artifact
from ..served import RUNNERS_BUNDLE, RUNNERS_DIR, SERVED
from ..settings import deployments
from . import config as triton_config
from . import cpp_backend, signature

VERSION = "1"
CONFIG = "config.pbtxt"
# what Snakemake leaves in a folder it made (the export's copy): not the user's
SNAKEMAKE_MARKER = ".snakemake_timestamp"


def config_path(repository: Path, name: str) -> Path:
    return Path(repository) / name / CONFIG


def add_python_model(version_dir: Path, served_file: str) -> None:
    """`served/<served_file>` as the version folder's model.py, with the runners beside it."""
    version_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SERVED / served_file, version_dir / "model.py")
    shutil.copytree(RUNNERS_DIR, version_dir / RUNNERS_BUNDLE,
                    ignore=shutil.ignore_patterns("__pycache__"))


def cpp_serves(run: dict) -> bool:
    """Whether the pipeline's C++ backend serves this run's format."""
    return run["backend"]["runner"] in cpp_backend.RUNNERS


def choose_backend(run: dict, available: list[str]) -> str:
    """The Triton backend that serves this run: the pipeline's C++ backend, its format's
    framework backend or `python`, given the backends the server has (`available`) and
    `server.serve_with`."""
    own, choice = run["backend"]["triton_backend"], run["server"].get("serve_with", "auto")
    if choice == "python":
        return "python"
    cpp = cpp_serves(run) and cpp_backend.NAME in available
    if choice == cpp_backend.NAME:
        if cpp:
            return cpp_backend.NAME
        why = (f"it does not serve backend '{run['key']['backend']}' (it serves the runners "
               f"{', '.join(cpp_backend.RUNNERS)})" if not cpp_serves(run)
               else "the server's backend directory has no 'deploybench' backend (it has: "
                    f"{', '.join(sorted(available)) or 'none'}; the install records why)")
        raise ValueError(f"server.serve_with is 'deploybench' but {why}; use serve_with: "
                         "auto or python")
    if choice == "auto" and cpp:
        return cpp_backend.NAME
    if own and own in available:
        return own
    if choice == "framework":
        why = (f"backend '{run['key']['backend']}' has no framework backend" if not own
               else f"the server's backend directory has no '{own}' backend "
                    f"(it has: {', '.join(sorted(available)) or 'none'})")
        raise ValueError(f"server.serve_with is 'framework' but {why}; use serve_with: auto "
                         "or python")
    if "python" not in available:
        raise ValueError(f"the server has neither the '{own}' nor the python backend "
                         f"(it has: {', '.join(sorted(available)) or 'none'})")
    return "python"


def create(run: dict, artifact: Path, repository: Path, available: list[str],
           name: str | None = None) -> str:
    """A single model `name` (default the model key), once per deployment
    (deploybench.settings.deployments):
    `<repo>/<name>/config.pbtxt` and `<repo>/<name>/1/<artifact>` (plus model.py and the
    runners for the python backend; a per-batch deployment's artifact a hard link of the
    first's), for the server whose backends are `available`; returns the Triton backend
    that serves them."""
    backend = choose_backend(run, available)
    first = None
    for deployment in deployments.of(run, name):
        version_dir = Path(repository) / deployment.name / VERSION
        version_dir.mkdir(parents=True, exist_ok=True)
        if backend == "python":
            add_python_model(version_dir, "python_model.py")
        served = version_dir / run["artifact"]
        if first is None:
            copy_artifact(artifact, served)
            first = served
        else:
            link_artifact(first, served)
        config = triton_config.model_config(deployment.name, run, backend, artifact,
                                            deployment)
        # as a framework backend checks it at load, before any server does
        signature.check(config, artifact, backend,
                        served_by_us=backend in ("python", cpp_backend.NAME))
        triton_config.write(config, config_path(repository, deployment.name))
    return backend


def create_floor(run: dict, out_config: Path, triton_backend: str = "python") -> None:
    """An identity model with the run's tensors and Triton settings (zeros, at no cost),
    served by `triton_backend` (python: the same model file as the run, runners.identity;
    deploybench: the C++ backend's identity engine): what Triton and that backend cost by
    themselves on the run's data path."""
    floor = {**run, "backend": {**run["backend"], "runner": "identity", "triton_backend": None},
             "artifact": "identity"}  # the identity runner reads no file
    version_dir = Path(out_config).parent / VERSION
    if triton_backend == "python":
        add_python_model(version_dir, "python_model.py")
    version_dir.mkdir(parents=True, exist_ok=True)
    triton_config.write(
        triton_config.model_config(Path(out_config).parent.name, floor, triton_backend),
        out_config)


def scenario_repository(src: Path, dst: Path, static_batching: bool, on_cpu: bool) -> Path:
    """`dst`: the repository `src` with every model's scenario config and links to the
    rest of its files. An ensemble needs it: loading one (re)loads its parts from the
    repository, so load-time overrides of the parts would be lost."""
    for model_dir in sorted(p for p in Path(src).iterdir() if (p / CONFIG).is_file()):
        out = Path(dst) / model_dir.name
        out.mkdir(parents=True)
        for item in model_dir.iterdir():
            if item.name != CONFIG:
                (out / item.name).symlink_to(item.resolve())
        config = triton_config.read(model_dir / CONFIG)
        triton_config.write(
            triton_config.scenario_config(config, static_batching, on_cpu) or config,
            out / CONFIG)
    return Path(dst)


def serve_as_is(model_dir: Path, repository: Path, name: str, available: list[str],
                on_gpu: bool) -> str:
    """A user's Triton model folder in `repository` as model `name`, as it is: its files
    byte for byte, its one served version as version 1 (VERSION, the one every request
    names), its config's fields unchanged but `name` and `version_policy` (that version);
    refused where the server lacks the backend it names, or it asks for GPU instances on
    a key without one. Returns that backend."""
    config = triton_config.read(Path(model_dir) / CONFIG)
    backend = triton_config.served_by(config)
    if backend not in available:
        raise ValueError(
            f"the repository model '{model_dir}' is served by Triton's '{backend}' backend, "
            f"which this server lacks (it has: {', '.join(sorted(available)) or 'none'}): "
            "serve it with a Triton that has it (server.kind binary or container), measure "
            "a server that runs it (server.kind remote), or add the model file in its "
            "version folder with deploybench add-model, which the pipeline serves itself")
    gpus = [g for g in config.instance_group if g.kind == mc.ModelInstanceGroup.KIND_GPU]
    if gpus and not on_gpu:
        raise ValueError(f"the repository model '{model_dir}' asks for GPU instances "
                         "(instance_group kind KIND_GPU) and the key serves on the CPU: "
                         "measure it on a GPU key")
    served = served_version(model_dir, config)
    out = Path(repository) / name
    out.mkdir(parents=True)
    for item in Path(model_dir).iterdir():
        if item.name in (CONFIG, SNAKEMAKE_MARKER) or (item.is_dir() and item.name.isdigit()):
            continue  # the config written below; of the versions, the served one alone
        copy_artifact(item, out / item.name)
    copy_artifact(served, out / VERSION)
    config.name = name
    config.ClearField("version_policy")
    triton_config.write(config, out / CONFIG)
    return backend


def served_version(model_dir: Path, config: mc.ModelConfig) -> Path:
    """The one version folder of a model that its config's version_policy serves (default:
    the latest); refused where it serves none or several: the pipeline measures one."""
    found = sorted((p for p in Path(model_dir).iterdir() if p.is_dir() and p.name.isdigit()),
                   key=lambda p: int(p.name))
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        served = found
    elif choice == "specific":
        served = [p for p in found if int(p.name) in policy.specific.versions]
    else:
        served = found[-(policy.latest.num_versions or 1):]
    if len(served) != 1:
        raise ValueError(f"model folder '{model_dir}' serves {len(served)} versions "
                         f"({', '.join(p.name for p in served) or 'no numbered folder'}): the "
                         "pipeline measures one; set its version_policy to the one to measure "
                         "(e.g. latest { num_versions: 1 }) and keep its version folder")
    return served[0]
