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
choice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .. import deployments
from ..files import copy_artifact, link_artifact
from ..served import RUNNERS_BUNDLE, RUNNERS_DIR, SERVED
from . import config as triton_config
from . import cpp_backend, signature

VERSION = "1"
CONFIG = "config.pbtxt"


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
    (deploybench.deployments):
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
