"""The pipeline's own Triton backend, `deploybench` (C++ in triton_backend/): libtorch inside
the server's process serving the converted PyTorch artifacts (TorchScript, AOTInductor
packages, either one as CUDA graphs), where the python backend runs them in a stub process
behind shared-memory copies.

`library()` builds it once against the installed torch (its CPU or CUDA build, whichever is
here) with the C++ compiler here, in parallel, and caches it by its sources, torch's build
and the compiler; a later call finds it in the cache. Where it cannot be built (no
compiler, no torch headers, a CUDA torch without CUDA's headers) it raises `Unavailable`
with the reason, which the install records and the repository step reports when it falls
back to the python backend.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import runners

NAME = "deploybench"  # the backend configs name: backend: "deploybench"
LIBRARY = f"libtriton_{NAME}.so"
SOURCES = Path(__file__).resolve().parents[3] / "triton_backend"
# The runners it serves, as the python backend would (deploybench.runners.RUNNERS says)
RUNNERS = tuple(name for name, facts in runners.RUNNERS.items() if facts.in_cpp_backend)


class Unavailable(RuntimeError):
    """The backend cannot be built here; the message says why."""


def source_files() -> list[Path]:
    return sorted(p for p in SOURCES.iterdir() if p.suffix in (".cc", ".h"))


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx or not shutil.which(cxx):
        raise Unavailable("no C++ compiler (g++): install one, or set CXX")
    return shutil.which(cxx)


def _torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("torch is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _key(cxx: str) -> str:
    """Sources, torch's build and the compiler: what the library depends on."""
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    torch_dir = _torch_dir()
    stat = Path(cxx).stat()
    digest.update(json.dumps([importlib.metadata.version("torch"), str(torch_dir), cxx,
                              stat.st_size, stat.st_mtime_ns]).encode())
    return digest.hexdigest()[:16]


# torch's build; for a CUDA build also the CUDA runtime its libraries loaded (the
# backend links that one: the server holds a CUDA 12 runtime of its own, and unversioned
# references could bind to it)
_PROBE = """
import json, sys, torch
from torch.utils import cpp_extension
maps = open("/proc/self/maps").read().split()
cudart = sorted({p for p in maps if "/libcudart.so" in p})
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda,
                  "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI), "cudart": cudart,
                  "include": cpp_extension.include_paths(), "lib": cpp_extension.library_paths()}))
"""


def _cuda_include() -> Path:
    """Where cuda_runtime_api.h is: CUDA_HOME, /usr/local/cuda, or an nvidia wheel's."""
    places = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH")
              if os.environ.get(v)]
    places.append(Path("/usr/local/cuda/include"))
    nvidia = importlib.util.find_spec("nvidia")
    for root in (nvidia.submodule_search_locations if nvidia else []):
        places += sorted(Path(root).glob("*/include"))
    for place in places:
        if (place / "cuda_runtime_api.h").is_file():
            return place
    raise Unavailable("torch is a CUDA build but CUDA's headers (cuda_runtime_api.h) are "
                      "not here: set CUDA_HOME to a CUDA toolkit")


def _command_lines(cxx: str, torch_info: dict, out: Path) -> tuple[list[list[str]], list[str]]:
    """The compile command of each source and the link command."""
    flags = ["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wno-unused",
             f"-D_GLIBCXX_USE_CXX11_ABI={torch_info['abi']}",
             f"-DDEPLOYBENCH_TORCH_VERSION=\"{torch_info['version']}\""]
    flags += [f"-I{p}" for p in torch_info["include"]]
    libs = ["-ltorch", "-ltorch_cpu", "-lc10"]
    lib_dirs = list(torch_info["lib"])
    if torch_info["cuda"]:
        if not torch_info["cudart"]:
            raise Unavailable(f"torch {torch_info['version']} loaded no CUDA runtime")
        cudart = Path(torch_info["cudart"][0])
        flags += ["-DDEPLOYBENCH_CUDA", f"-I{_cuda_include()}"]
        libs += ["-ltorch_cuda", "-lc10_cuda", f"-l:{cudart.name}"]
        lib_dirs.append(str(cudart.parent))
    objects = [out.parent / f"{p.stem}.o" for p in source_files() if p.suffix == ".cc"]
    compiles = [[cxx, *flags, "-c", str(SOURCES / f"{o.stem}.cc"), "-o", str(o)]
                for o in objects]
    # The TRITON* symbols stay undefined: the server that loads the backend holds them.
    link = [cxx, "-shared", "-o", str(out), *map(str, objects),
            *(f"-L{d}" for d in lib_dirs), *libs, *(f"-Wl,-rpath,{d}" for d in lib_dirs)]
    return compiles, link


def _build(cxx: str, out: Path) -> None:
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    if probe.returncode:
        raise Unavailable(f"cannot read torch's build: {probe.stderr.strip()[-500:]}")
    torch_info = json.loads(probe.stdout.strip().splitlines()[-1])
    if not any((Path(p) / "torch" / "script.h").is_file() for p in torch_info["include"]):
        raise Unavailable(f"torch {torch_info['version']} has no C++ headers (torch/script.h)")
    compiles, link = _command_lines(cxx, torch_info, out)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda c: subprocess.run(c, capture_output=True, text=True),
                                compiles))
    for command, result in zip([*compiles, link], [*results, None]):
        if result is None:
            result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode:
            raise Unavailable(f"building the backend failed:\n$ {' '.join(command)}\n"
                              f"{result.stderr[-4000:]}")


@functools.cache
def library(cache: Path) -> Path:
    """The built backend library under `cache` (built now where it is not there yet)."""
    cxx = _compiler()
    folder = cache / f"cpp-backend-{_key(cxx)}"
    out = folder / LIBRARY
    if out.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:  # parallel jobs build it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_file():
            tmp = folder / f".{LIBRARY}.{os.getpid()}"
            _build(cxx, tmp)
            os.replace(tmp, out)
    return out
