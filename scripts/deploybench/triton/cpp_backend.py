"""The pipeline's own Triton backend, `deploybench` (C++ in triton_backend/): the converted
artifacts served inside the server's process (PyTorch's formats with libtorch, ONNX with
ONNX Runtime's C API, a recommender's embedding lookups), where the python backend runs
them in a stub process behind shared-memory copies.

`library()` builds it once with CMake and Ninja (triton_backend/CMakeLists.txt) against the
installed torch (its CPU or CUDA build, whichever is here) and onnxruntime (the wheel's C API
library), with the C++ compiler here, and caches it by its sources, that configuration and
the compiler; a later call finds it in the cache. Where it cannot be built (no
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
    """What the build reads: the build file, the sources and their unit tests."""
    return sorted(p for p in SOURCES.rglob("*")
                  if p.suffix in (".cc", ".h") or p.name == "CMakeLists.txt")


def _tool(name: str) -> str:
    """cmake or ninja: the environment's (the `cmake` and `ninja` wheels), else the PATH's."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if not found:
        raise Unavailable(f"no {name}: install the project's dependencies (pip install {name})")
    return found


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx or not shutil.which(cxx):
        raise Unavailable("no C++ compiler (g++): install one, or set CXX")
    return shutil.which(cxx)


# torch's and onnxruntime's builds; for a CUDA torch also the CUDA runtime its libraries
# loaded (the backend links that one: the server holds a CUDA 12 runtime of its own, and
# unversioned references could bind to it)
_PROBE = """
import glob, json, os, torch
from torch.utils import cpp_extension
maps = open("/proc/self/maps").read().split()
cudart = sorted({p for p in maps if "/libcudart.so" in p})
try:
    import onnxruntime
    capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
    ort = {"version": onnxruntime.__version__,
           "library": sorted(glob.glob(os.path.join(capi, "libonnxruntime.so.*")))}
except ImportError:
    ort = None
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda,
                  "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI), "cudart": cudart,
                  "include": cpp_extension.include_paths(), "lib": cpp_extension.library_paths(),
                  "onnxruntime": ort}))
"""


@functools.cache
def _probe() -> dict:
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    if probe.returncode:
        raise Unavailable(f"cannot read torch's build: {probe.stderr.strip()[-500:]}")
    return json.loads(probe.stdout.strip().splitlines()[-1])


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


def cmake_definitions(info: dict) -> dict[str, str]:
    """What CMakeLists.txt is configured with: torch's build, CUDA's, onnxruntime's."""
    if not any((Path(p) / "torch" / "script.h").is_file() for p in info["include"]):
        raise Unavailable(f"torch {info['version']} has no C++ headers (torch/script.h)")
    flags = {"TORCH_VERSION": info["version"], "TORCH_CXX11_ABI": str(info["abi"]),
             "TORCH_INCLUDE_DIRS": ";".join(info["include"]),
             "TORCH_LIBRARY_DIRS": ";".join(info["lib"])}
    if info["cuda"]:
        if not info["cudart"]:
            raise Unavailable(f"torch {info['version']} loaded no CUDA runtime")
        flags |= {"CUDART_LIBRARY": info["cudart"][0], "CUDA_INCLUDE_DIR": str(_cuda_include())}
    ort = info.get("onnxruntime")
    if ort and ort["library"]:
        flags |= {"ONNXRUNTIME_LIBRARY": ort["library"][-1],
                  "ONNXRUNTIME_VERSION": ort["version"]}
    return flags


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _key(cxx: str) -> str:
    """The sources, what the build is configured with (torch's build and onnxruntime's
    library, by version and place) and the compiler: what the library depends on. Read
    without importing torch, which a measuring step would otherwise pay for."""
    torch_dir = _package_dir("torch")
    if torch_dir is None:
        raise Unavailable("torch is not installed")
    ort_dir = _package_dir("onnxruntime")
    ort = sorted(p.name for p in (ort_dir / "capi").glob("libonnxruntime.so.*")) if ort_dir else []
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes())
    stat = Path(cxx).stat()
    digest.update(json.dumps([importlib.metadata.version("torch"), str(torch_dir),
                              str(ort_dir), ort, cxx, stat.st_size, stat.st_mtime_ns]).encode())
    return digest.hexdigest()[:16]


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise Unavailable(f"{what} failed:\n$ {' '.join(command)}\n"
                          f"{(result.stdout + result.stderr)[-4000:]}")


def build(cxx: str, build_dir: Path, target: str = "triton_deploybench",
          sources: Path = SOURCES) -> None:
    """Configure (once) and build `target` in `build_dir` with CMake and Ninja (`sources`:
    another copy of triton_backend/, a benchmark's baseline)."""
    if not (build_dir / "build.ninja").is_file():
        definitions = cmake_definitions(_probe())
        _run([_tool("cmake"), "-S", str(sources), "-B", str(build_dir), "-G", "Ninja",
              f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}", f"-DCMAKE_CXX_COMPILER={cxx}",
              *(f"-D{k}={v}" for k, v in definitions.items())], "configuring the backend")
    _run([_tool("cmake"), "--build", str(build_dir), "--target", target,
          "--parallel", str(os.cpu_count() or 1)], f"building {target}")


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
            build_dir = folder / "build"
            build(cxx, build_dir)
            tmp = folder / f".{LIBRARY}.{os.getpid()}"
            shutil.copyfile(build_dir / LIBRARY, tmp)
            os.replace(tmp, out)
    return out


def unit_tests(cache: Path) -> Path:
    """The C++ unit tests' program (triton_backend/tests), built beside the library."""
    library(cache)
    folder = cache / f"cpp-backend-{_key(_compiler())}"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build(_compiler(), folder / "build", "deploybench_unit_tests")
    return folder / "build" / "deploybench_unit_tests"
