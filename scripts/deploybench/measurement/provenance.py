"""What a measurement ran on: versions, devices, configuration hash, date."""

from __future__ import annotations

import ast
import datetime as dt
import fnmatch
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

from ..records import atomic, layout
from .device import measured_device, query_gpus

PROJECT = Path(__file__).resolve().parents[3]
# nvidia-smi's fields for each GPU (keys of the provenance's "gpus" entries)
GPU_FIELDS = {"name": "name", "uuid": "uuid", "driver": "driver_version",
              "memory": "memory.total", "power_limit": "power.limit",
              "max_sm_clock": "clocks.max.sm", "max_memory_clock": "clocks.max.memory",
              "persistence": "persistence_mode", "mig": "mig.mode.current",
              "ecc": "ecc.mode.current"}


def config_hash(run: dict) -> str:
    return hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()[:16]


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_build() -> dict:
    """{"cuda": the CUDA version torch was built for}, {} without torch: read from its
    version.py, since importing torch costs a measuring step a second."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    return {"cuda": torch_cuda(Path(spec.submodule_search_locations[0]) / "version.py")}


def torch_cuda(version_py: Path) -> str | None:
    """`cuda` of a torch/version.py (None: a CPU build), parsed, never run."""
    for node in ast.parse(version_py.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "cuda":
            return ast.literal_eval(node.value)
    return None


def _nvidia_smi() -> dict:
    gpus = query_gpus(",".join(GPU_FIELDS.values()))
    return {"gpus": [dict(zip(GPU_FIELDS, g)) for g in gpus if len(g) == len(GPU_FIELDS)]
            } if gpus else {}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what Python knows ("x86_64")."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The project's paths whose contents decide what a measurement runs (not its results or
# documents): their digest names the code of a copy whose history is older than its files
CODE_PATHS = ("Snakefile", "rules", "scripts", "triton_backend", "config", "report", "envs",
              "pyproject.toml")


# What the root .gitignore ignores under CODE_PATHS: a copy without .git (a lent machine's)
# skips the same files (tests/unit/test_provenance.py checks that git ignores nothing else there)
NOT_CODE = ("__pycache__", "*.pyc", "*.egg-info", ".*.tmp-*")


def _git(root: Path, *args: str, stdin: str | None = None) -> str | None:
    try:
        result = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                text=True, timeout=60, check=False, input=stdin)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _digest(blobs: dict[str, str]) -> str:
    """path -> git blob id, as one id (sha256 of the sorted lines)."""
    text = "".join(f"{blob} {path}\n" for path, blob in sorted(blobs.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_digest(root: Path = PROJECT, commit: str | None = None) -> str | None:
    """The digest of CODE_PATHS' files: a commit's, or (None) the files as they are here,
    tracked or new (unless ignored), without writing to the repository."""
    if commit is not None:
        listing = _git(root, "ls-tree", "-r", "-z", commit, "--", *CODE_PATHS)
        if listing is None:
            return None
        # "<mode> <type> <blob>\t<path>" each
        return _digest(dict(entry.split(" ", 2)[2].split("\t", 1)[::-1]
                            for entry in listing.split("\0") if entry))
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
                  *CODE_PATHS)
    if listed is None:  # not a checkout: the files, hashed as git hashes them
        return _digest({str(path.relative_to(root)): _blob_id(path)
                        for path in _code_files(Path(root))})
    paths = sorted({p for p in listed.split("\0") if p and (Path(root) / p).is_file()})
    if not paths:
        return _digest({})
    blobs = _git(root, "hash-object", "--stdin-paths", stdin="\n".join(paths) + "\n")
    return _digest(dict(zip(paths, blobs.splitlines()))) if blobs is not None else None


def _code_files(root: Path) -> list[Path]:
    """CODE_PATHS' files under `root`, but what NOT_CODE names."""
    found = []
    for top in CODE_PATHS:
        if (root / top).is_file():
            found.append(root / top)
        for folder, dirs, files in os.walk(root / top):
            dirs[:] = [d for d in dirs if not _ignored(d)]
            found += [Path(folder, f) for f in files if not _ignored(f)]
    return found


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_CODE)


def _blob_id(path: Path) -> str:
    """The id git gives the file's contents (a symbolic link's: its target)."""
    data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commits_with_code(digest: str, root: Path = PROJECT) -> list[str]:
    """The commits (newest first) whose code has this digest."""
    commits = (_git(root, "rev-list", "--all") or "").split()
    return [c for c in commits if code_digest(root, c) == digest]


def git_revision(root: Path = PROJECT) -> dict | None:
    """The project's commit, whether its tracked files differ from it, and the digest of
    its code as it is (`code_digest`; a dirty copy's code is then the commit
    `python -m deploybench.measurement.provenance DIGEST` names, where the copy's history is older
    than its files, as on a lent machine). Outside a checkout (a copy without .git) only
    the digest, from the files."""
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "code": code_digest(root)}
    return {"commit": commit,
            "dirty": bool(_git(root, "status", "--porcelain", "--untracked-files=no")),
            "code": code_digest(root)}


@lru_cache(maxsize=1)
def installed_packages() -> tuple[str, str]:
    """Every installed distribution as sorted `name==version` lines, and their hash."""
    lines = sorted({f"{d.metadata['Name']}=={d.version}"
                    for d in importlib.metadata.distributions() if d.metadata["Name"]},
                   key=str.lower)
    text = "\n".join(lines) + "\n"
    return text, hashlib.sha256(text.encode()).hexdigest()[:16]


def keep_packages() -> str:
    """The package list written once under its hash (results/packages/); the hash."""
    text, sha = installed_packages()
    path = Path(layout.fill(layout.PACKAGES, sha=sha))
    if not path.exists():
        with atomic.output(path) as tmp:
            tmp.write_text(text)
    return sha


def collect(run: dict, server_metadata: dict | None = None, device_check: dict | None = None,
            server: dict | None = None) -> dict:
    """What a measurement ran on; `server`: the Triton install and who served the model."""
    info = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "project": git_revision(),
        "installed_packages": keep_packages(),
        "config_hash": config_hash(run),
        "key": run["key"],
        "packages": {p: _version(p) for p in
                     ("torch", "onnxruntime", "onnx", "tritonclient", "nvidia-pytriton",
                      "snakemake", "numpy")},
        **_nvidia_smi(),
        **_torch_build(),
    }
    if gpu_build := _version("onnxruntime-gpu"):  # beside (and imported before) the CPU one
        info["packages"]["onnxruntime-gpu"] = gpu_build
    if server_metadata:
        info["triton"] = {"name": server_metadata.get("name"),
                          "version": server_metadata.get("version")}
        # perf_analyzer ships in the tritonclient wheel and reports no version of its own.
        info["perf_analyzer"] = f"tritonclient {_version('tritonclient')} wheel"
    if device_check:
        info["device_check"] = device_check
        info["device"] = measured_device(device_check)
    if server:
        info["server"] = server
    return info


# python -m deploybench.measurement.provenance DIGEST: the commits of that code
if __name__ == "__main__":
    import sys

    print("\n".join(commits_with_code(sys.argv[1])) or f"no commit has code {sys.argv[1]}")


def measured_devices(prov: dict) -> str | list[str]:
    """What a served measurement's telemetry and host load sample: the GPUs its
    deployment spans where several (their locks), else its device."""
    return prov.get("device_lock", {}).get("devices") or prov["device"]
