"""The Triton install: the server and perf_analyzer binaries and the environment they need.

The embedded default is the `tritonserver` shipped inside the `nvidia-pytriton` wheel
(python backend only) and the `perf_analyzer` shipped in the `tritonclient` 2.50 wheel.
Neither runs from the wheel as is: the python backend needs the stub built for the
interpreter that runs the models, and perf_analyzer links `libb64.so.0d` and
`libcudart.so.12` even on a CPU-only machine. `prepare()` assembles those pieces in a
cache folder once and returns what a process needs to start them; `for_server()` picks
the install the config's `server` section names (embedded, binary or container).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from . import cpp_backend


class InstallMissing(RuntimeError):
    """A binary or library the pipeline needs is not installed."""


@dataclass(frozen=True)
class Install:
    tritonserver: Path
    backend_dir: Path
    perf_analyzer: Path
    env: dict[str, str]  # environment for both processes (library and python paths)
    launcher: tuple[str, ...] = ()  # argv prefix that runs tritonserver (a container)
    # LD_PRELOAD shim that makes a server's shared memory private (shm_folder.c); None
    # where the server cannot take it (a docker container does not inherit the environment)
    shm_shim: Path | None = None
    # The pipeline's C++ backend (cpp_backend) in backend_dir, or why it is not there
    cpp_backend: str = "not built for this server: its backend directory is its own"

    @property
    def backends(self) -> list[str]:
        """The Triton backends this server has (folders of its backend directory)."""
        if self.launcher:  # the folder is inside the image
            listed = subprocess.run([*self.launcher, "ls", str(self.backend_dir)],
                                    capture_output=True, text=True, env=self.env)
            if listed.returncode:
                raise InstallMissing(f"cannot list {self.backend_dir} in the server container "
                                     f"({' '.join(self.launcher)}): {listed.stderr.strip()}")
            return sorted(listed.stdout.split())
        if not self.backend_dir.is_dir():
            return []
        return sorted(p.name for p in self.backend_dir.iterdir() if p.is_dir())

    def server_command(self, *args: str) -> list[str]:
        return [*self.launcher, str(self.tritonserver), *args]

    def describe(self) -> dict:
        return {
            "launcher": " ".join(self.launcher) or None,
            "tritonserver": str(self.tritonserver),
            "backend_directory": str(self.backend_dir),
            "backends": self.backends,
            "perf_analyzer": str(self.perf_analyzer),
            "shared_memory": "a folder per server" if self.shm_shim else "host-wide names",
            "cpp_backend": self.cpp_backend,
        }


# Where an NGC tritonserver image keeps the server and its backends.
NGC_SERVER = Path("/opt/tritonserver/bin/tritonserver")
NGC_BACKENDS = Path("/opt/tritonserver/backends")


def container(image: str, engine: str, workdir: Path) -> Install:
    """A server in a container image (an NGC tritonserver image, or one built from
    containers/server.Dockerfile), on the host network with the GPUs and the working
    directory mounted at the same path, so the model repository paths hold inside.
    perf_analyzer and the clients stay on the host, as with the other kinds."""
    if shutil.which(engine) is None:
        raise InstallMissing(f"container engine '{engine}' not found; install it or use "
                             "server.kind embedded/binary")
    work = str(Path(workdir).resolve())
    if engine == "apptainer":
        launcher = ("apptainer", "exec", "--nv", "--bind", work, image)
    else:  # docker: the client forwards the stop signal to the container (--init reaps)
        # the GPUs the step claimed (device.claim), by UUID; every one without a claim
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = f'"device={visible}"' if visible else "all"
        launcher = ("docker", "run", "--rm", "--init", "--gpus", gpus, "--network", "host",
                    "--shm-size", "1g", "-v", f"{work}:{work}", "-w", work, image)
    host = prepare()  # perf_analyzer and its libraries on the host
    # apptainer passes the environment and the home folder (the shim's cache) through
    shim = host.shm_shim if engine == "apptainer" else None
    return Install(NGC_SERVER, NGC_BACKENDS, host.perf_analyzer, host.env, launcher, shim)


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise InstallMissing(
            f"Python package '{name}' is not installed; run the set-up command of the README"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _pytriton_libs() -> Path:
    return _package_dir("pytriton").parent / "nvidia_pytriton.libs"


def _find_perf_analyzer() -> Path:
    found = shutil.which("perf_analyzer") or str(Path(sys.executable).parent / "perf_analyzer")
    if not Path(found).is_file():
        raise InstallMissing(
            "perf_analyzer not found: it ships in the tritonclient==2.50.0 wheel "
            "(pip install 'tritonclient[all]==2.50.0')"
        )
    return Path(found)


def _cudart_dir() -> Path:
    try:
        return _package_dir("nvidia") / "cuda_runtime" / "lib"
    except InstallMissing as err:
        raise InstallMissing(
            "libcudart.so.12 (needed by perf_analyzer) not found: "
            "pip install nvidia-cuda-runtime-cu12"
        ) from err


def _link(target: Path, link: Path) -> None:
    """Point `link` at `target`, atomically (parallel jobs prepare the same folder)."""
    if link.is_symlink() and link.resolve() == target.resolve():
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


SHIM_SOURCE = Path(__file__).with_name("shm_folder.c")


def _shm_shim(libs: Path) -> Path:
    """The shared-memory shim (shm_folder.c), built once per version of its source with
    the C compiler here, or the prebuilt one DEPLOYBENCH_SHM_SHIM names."""
    prebuilt = os.environ.get("DEPLOYBENCH_SHM_SHIM")
    if prebuilt:
        if not Path(prebuilt).is_file():
            raise InstallMissing(f"DEPLOYBENCH_SHM_SHIM={prebuilt} does not exist")
        return Path(prebuilt)
    digest = hashlib.sha256(SHIM_SOURCE.read_bytes()).hexdigest()[:12]
    out = libs / f"libdeploybench_shm-{digest}.so"
    if out.is_file():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise InstallMissing(
            "no C compiler (cc) here to build the shared-memory shim that keeps two "
            "measurements' regions apart: install gcc, or set DEPLOYBENCH_SHM_SHIM to a "
            "libdeploybench_shm.so built elsewhere (scripts/machines/pack_offline.py carries one)")
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    built = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SHIM_SOURCE),
                            "-ldl"], capture_output=True, text=True)
    if built.returncode:
        raise InstallMissing(f"building {SHIM_SOURCE.name} with {cc} failed:\n{built.stderr}")
    os.replace(tmp, out)
    return out


@functools.cache
def _cpp_backend(backends: Path) -> str:
    """The pipeline's C++ backend in `backends` (built where it is not cached yet): its
    library, or why it is not there (the python backend then serves every format)."""
    folder = backends / cpp_backend.NAME
    try:
        built = cpp_backend.library(cache_dir())
    except cpp_backend.Unavailable as why:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"deploybench: the C++ backend is not available, the python backend serves "
              f"every format: {why}", file=sys.stderr, flush=True)
        return f"unavailable: {why}"
    folder.mkdir(exist_ok=True)
    _link(built, folder / cpp_backend.LIBRARY)
    return str(built)


def cache_dir() -> Path:
    return Path(os.environ.get("DEPLOYBENCH_CACHE", Path.home() / ".cache" / "deploybench"))


def prepare(tritonserver: str | None = None, backend_dir: str | None = None) -> Install:
    """The embedded install; `tritonserver`/`backend_dir` point to a full install instead."""
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    # One folder per Python environment: its links point into that environment's wheels.
    env_id = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    work = cache_dir() / f"install-py{pyver}-{env_id}"
    libs = work / "lib"
    libs.mkdir(parents=True, exist_ok=True)

    if tritonserver:
        server = Path(tritonserver)
        if not server.is_file():
            raise InstallMissing(f"tritonserver binary '{server}' does not exist")
        backends = Path(backend_dir) if backend_dir else server.parent.parent / "backends"
    else:
        bundled = _package_dir("pytriton") / "tritonserver"
        server = bundled / "bin" / "tritonserver"
        stub = bundled / "python_backend_stubs" / pyver / "triton_python_backend_stub"
        if not stub.is_file():
            raise InstallMissing(f"the bundled Triton has no python backend stub for {pyver}")
        # A private backend folder: the bundled python backend plus the stub of this Python.
        backends = work / "backends"
        python_backend = backends / "python"
        python_backend.mkdir(parents=True, exist_ok=True)
        for item in (bundled / "backends" / "python").iterdir():
            if item.name != "__pycache__":
                _link(item, python_backend / item.name)
        _link(stub, python_backend / "triton_python_backend_stub")
        cpp = _cpp_backend(backends)
        b64 = next(_pytriton_libs().glob("libb64-*.so.0d"), None)
        if b64 is not None:  # perf_analyzer asks for it by its plain name
            _link(b64, libs / "libb64.so.0d")

    _link(_cudart_dir() / "libcudart.so.12", libs / "libcudart.so.12")

    env = dict(os.environ)
    lib_path = [str(libs), sysconfig.get_config_var("LIBDIR") or ""]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in [*lib_path, env.get("LD_LIBRARY_PATH", "")] if p
    )
    # The python backend stub runs the base interpreter isolated (PYTHONPATH ignored); the
    # served model.py puts these paths first: DEPLOYBENCH_SERVER_PYTHONPATH (packages for the
    # server only, e.g. the numpy<2 that the stub of Triton 2.51 needs where the environment
    # has numpy 2), then this environment's packages.
    server_only = env.get("DEPLOYBENCH_SERVER_PYTHONPATH", "")
    env["DEPLOYBENCH_STUB_PATH"] = os.pathsep.join(
        p for p in [server_only, *site.getsitepackages(), env.get("PYTHONPATH", "")] if p
    )
    extra = {} if tritonserver else {"cpp_backend": cpp}
    return Install(server, backends, _find_perf_analyzer(), env, shm_shim=_shm_shim(libs),
                   **extra)


def for_server(server: dict) -> Install:
    """The install the config's `server` section names."""
    if server["kind"] == "binary":
        return prepare(server["binary"], server.get("backend_directory"))
    if server["kind"] == "container":
        return container(server["image"], server.get("engine", "apptainer"), Path.cwd())
    return prepare()
