"""Pack what an offline GPU machine lacks to run this pipeline, into one .tar.xz.

The lent GPU machines (and many cluster nodes) have a CUDA PyTorch but no network,
no snakemake, no tritonclient, no Triton server. This collects, from this machine's
environment:
  - the Triton server of the nvidia-pytriton wheel (binary, python backend with the stub
    of the target Python, its libraries minus the unused libpython),
  - perf_analyzer (tritonclient 2.50 wheel), libcudart.so.12 it links, and the
    shared-memory shim (deploybench/triton/shm_folder.c) built for x86-64,
  - the Python packages the pipeline needs that the target lacks: pure-Python ones are
    copied from this environment, compiled ones are fetched as wheels for the target
    Python (pip download, so this step needs the package index),
into `<out>/offline-py<X.Y>.tar.xz`. On the target:

    mkdir -p /tmp/db && tar -xJf .pack/offline-py3.12.tar.xz -C /tmp/db
    export PYTHONPATH=/tmp/db/site:$PWD/scripts PATH=/tmp/db/bin:$PATH
    export DEPLOYBENCH_SERVER_PYTHONPATH=/tmp/db/stub-site
    export DEPLOYBENCH_SHM_SHIM=/tmp/db/bin/libdeploybench_shm.so
    python3 -m snakemake ...
(scripts/machines/offline_run.sh does this.)

Two bundles of their own, each too large to travel with the first, unpacked by
scripts/machines/offline_env.sh where they lie beside it: onnxruntime-gpu (~200 MB, in front of the
target's CPU build, for ONNX Runtime on its GPU) and tensorflow-cpu (the tf extra's
TensorFlow, Keras and tf2onnx, which the Keras models' build steps need and the lent
machine lacks). `--part-mib N` also splits a bundle in parts for transfers limited in
size, with their sums (e.g. onnxruntime-gpu-py3.12.tar.xz.sha256), from which
scripts/machines/offline_env.sh joins them.

Usage: python scripts/machines/pack_offline.py --python 3.12 --out .pack
       python scripts/machines/pack_offline.py --python 3.12 --out .pack --onnxruntime-gpu 1.31.1
       python scripts/machines/pack_offline.py --python 3.12 --out .pack --tensorflow
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import lzma
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Roots of what the pipeline imports at run time (besides torch/onnx/numpy...).
ROOTS = ["snakemake", "tritonclient", "jsonschema", "nvidia-cuda-runtime-cu12",
         "markdown-it-py",  # the READMEs as HTML pages
         "nvidia-ml-py",  # NVML telemetry (pure Python: copied from here)
         "onnxconverter-common",  # ONNX FP16 conversion (the onnx fp16 configurations)
         "torchao"]  # the quantized precisions (compiled: fetched as the target's wheel)
# Already on the target (the lent H100's image); `--have` replaces this list.
TARGET_HAS = [
    "torch", "numpy", "pandas", "matplotlib", "onnx", "onnxruntime", "pyyaml", "grpcio",
    "protobuf",  # a newer one than tritonclient asks for; onnx there needs it
    "psutil", "wrapt", "jinja2", "markupsafe", "packaging", "requests", "urllib3", "certifi",
    "idna", "charset-normalizer", "attrs", "tabulate", "aiohttp", "typing-extensions",
    "filelock", "fsspec", "sympy", "mpmath", "networkx", "pillow", "six", "python-dateutil",
    "contourpy", "cycler", "fonttools", "kiwisolver", "pyparsing",
    "setuptools", "pip", "triton", "pytest", "pluggy", "iniconfig", "pygments",
    "frozenlist", "multidict", "yarl", "aiosignal", "aiohappyeyeballs", "propcache",
    "click", "rich", "markdown-it-py", "mdurl",
]
SKIP = {"pulp"}  # 36 MB; snakemake falls back to its greedy scheduler without it
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64",
             "manylinux1_x86_64", "manylinux_2_5_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str], stop: set[str]) -> list[md.Distribution]:
    """Installed distributions needed by `roots` (extras ignored), minus `stop`."""
    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name = norm(todo.pop())
        if name in seen or name in stop:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for req in dist.requires or []:
            if "extra ==" in req and not any(f'extra == "{e}"' in req for e in ("http", "grpc")):
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    return list(seen.values())


def is_pure(dist: md.Distribution) -> bool:
    return not any(str(f).endswith(".so") or ".so." in str(f) for f in dist.files or [])


def copy_dist(dist: md.Distribution, site: Path) -> None:
    for f in dist.files or []:
        src = Path(dist.locate_file(f))
        unused = f.suffix in (".a", ".h") or any(
            p == "__pycache__" or p == ".." or p.endswith(".data") for p in f.parts)
        if src.is_file() and not unused:
            dest = site / f
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)


def fetch_wheel(dist: md.Distribution, python: str, site: Path, tmp: Path) -> None:
    """The compiled wheel for the target; the same version if built for it, else the
    newest that is (e.g. geventhttpclient 2.0.2 has no CPython 3.12 wheel)."""
    name = dist.metadata["Name"]
    cmd = download_command(python, tmp)
    if subprocess.run([*cmd, f"{name}=={dist.version}"]).returncode:
        print(f"  ({name} {dist.version} has no wheel for Python {python}; taking the newest)")
        subprocess.run([*cmd, name], check=True)
    wheel = next(tmp.glob(f"{norm(dist.metadata['Name']).replace('-', '_')}-*.whl"), None) \
        or sorted(tmp.glob("*.whl"), key=lambda p: p.stat().st_mtime)[-1]
    extract_wheel(wheel, site)


def download_command(python: str, dest: Path) -> list[str]:
    """pip download of binary wheels for the target Python, without their dependencies."""
    return [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp", "-d", str(dest),
            *(f"--platform={p}" for p in PLATFORMS)]


def extract_wheel(wheel: Path, site: Path) -> None:
    """A wheel's files as installed into `site`."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            # <dist>.data/purelib|platlib/ belong in site-packages; other .data (scripts) not
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                info.filename = "/".join(parts[2:])
            z.extract(info, site)


def pack_triton(python: str, site: Path, bin_dir: Path) -> None:
    from deploybench.triton.install import _package_dir  # no import: pytriton's deps are absent

    pkg = _package_dir("pytriton")
    server = pkg / "tritonserver"
    dest = site / "pytriton" / "tritonserver"
    for part in ("bin", "backends", "caches"):
        shutil.copytree(server / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    stub = server / "python_backend_stubs" / python
    shutil.copytree(stub, dest / "python_backend_stubs" / python)
    (site / "pytriton" / "__init__.py").write_text("")
    libs = pkg.parent / "nvidia_pytriton.libs"
    shutil.copytree(libs, site / "nvidia_pytriton.libs",
                    ignore=shutil.ignore_patterns("libpython3*"))
    for data in (site / "nvidia_pytriton.libs").glob("libicudata-*.so*"):
        icu_data_stub(data)
    perf_analyzer = Path(shutil.which("perf_analyzer") or Path(sys.executable).parent /
                         "perf_analyzer")
    bin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(perf_analyzer, bin_dir / "perf_analyzer")
    # the shared-memory shim, built here (the target may have no C compiler)
    from deploybench.triton.install import prepare

    shutil.copy2(prepare().shm_shim, bin_dir / "libdeploybench_shm.so")


def icu_data_stub(library: Path) -> None:
    """ICU's data library (29 MB, 7 MiB of the packed bundle) replaced by one that defines
    its one symbol and holds no data: the server links it through libxml2, which reaches
    ICU only to convert XML that is not UTF-8, which Triton never reads here; ICU answers
    missing data with an error, not a crash. The server and both backends served
    (tests/e2e/test_triton_server.py, tests/e2e/test_cpp_backend.py) with it, 2026-11-26."""
    symbol = re.search(rb"icudt\d+_dat", subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, check=True).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "icudata.c"
        source.write_text(f"const unsigned char {symbol.group().decode()}[32] "
                          "__attribute__((aligned(16))) = {0};\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", f"-Wl,-soname,{library.name}", "-o",
                        str(library), str(source)], check=True)


def without_tests(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """The packages' own test suites and byte code stay out of the bundle (~10 MB)."""
    return None if {"tests", "__pycache__"} & set(Path(member.name).parts) else member


# What TensorFlow, Keras and tf2onnx need that the lent machine's image lacks (KINDS.md's
# package list); libclang, which TensorFlow's metadata names, is not imported at run time
TENSORFLOW_NEEDS = ["astunparse", "gast", "google-pasta", "termcolor", "namex", "optree"]


def tensorflow_requirements(python: str, pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The tf extra's TensorFlow, Keras and tf2onnx pins for an x86-64 target
    (pyproject.toml, the one place they are set; its pyarrow the target has), and the
    versions installed here of what the target lacks besides."""
    import tomllib
    from packaging.requirements import Requirement

    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["tf"]
    target = {"platform_machine": "x86_64", "python_version": python, "sys_platform": "linux"}
    pins = [f"{r.name}{r.specifier}" for r in map(Requirement, extra)
            if r.name in ("tensorflow-cpu", "tensorflow", "keras", "tf2onnx")
            and (r.marker is None or r.marker.evaluate(target))]
    return pins + [f"{name}=={md.version(name)}" for name in TENSORFLOW_NEEDS]


def pack_extra(name: str, requirements: list[str], python: str, out: Path,
               part_mib: int | None) -> None:
    """The requirements' wheels for the target, unpacked under NAME/ in a .tar.xz of its own
    (onnxruntime-gpu's CUDA provider alone is 284 MB, tensorflow-cpu's wheel 252 MB: too
    large to travel with the first)."""
    with tempfile.TemporaryDirectory() as tmp:
        wheels, site = Path(tmp) / "wheels", Path(tmp) / name
        subprocess.run([*download_command(python, wheels), *requirements], check=True)
        for wheel in sorted(wheels.glob("*.whl")):
            extract_wheel(wheel, site)
        out.mkdir(parents=True, exist_ok=True)
        archive = out / f"{name}-py{python}.tar.xz"
        with tarfile.open(archive, "w:xz", preset=9) as tar:
            tar.add(site, arcname=site.name, filter=without_tests)
    print(f"{archive}: {archive.stat().st_size / 2**20:.1f} MiB")
    if part_mib:
        for part in split(archive, part_mib * 2**20):
            print(f"  {part.name}: {part.stat().st_size / 2**20:.1f} MiB")


def split(archive: Path, size: int) -> list[Path]:
    """`archive` in parts of `size` bytes (ARCHIVE.partNN) and ARCHIVE.sha256, each part's
    and the whole's sums (sha256sum's format), by which scripts/machines/offline_env.sh joins the
    parts where they have all come and checks what it joined."""
    data = archive.read_bytes()
    parts = []
    for i in range(0, len(data), size):
        parts.append(archive.with_name(f"{archive.name}.part{i // size:02d}"))
        parts[-1].write_bytes(data[i:i + size])
    sums = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in parts]
    sums.append(f"{hashlib.sha256(data).hexdigest()}  {archive.name}")
    archive.with_name(f"{archive.name}.sha256").write_text("\n".join(sums) + "\n")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="Python X.Y of the target")
    parser.add_argument("--out", default=".pack", type=Path)
    parser.add_argument("--have", nargs="*", default=TARGET_HAS,
                        help="distributions the target already has")
    parser.add_argument("--onnxruntime-gpu", metavar="VERSION",
                        help="pack only onnxruntime-gpu of this version, in a bundle of its own")
    parser.add_argument("--tensorflow", action="store_true",
                        help="pack only the tf extra's TensorFlow (CPU), Keras and tf2onnx, "
                             "in a bundle of its own (tensorflow-cpu)")
    parser.add_argument("--part-mib", type=int,
                        help="with --onnxruntime-gpu or --tensorflow: also split the bundle "
                             "in parts this large")
    args = parser.parse_args()
    if args.onnxruntime_gpu:
        pack_extra("onnxruntime-gpu", [f"onnxruntime-gpu=={args.onnxruntime_gpu}"],
                   args.python, args.out, args.part_mib)
        return
    if args.tensorflow:
        pack_extra("tensorflow-cpu", tensorflow_requirements(args.python), args.python,
                   args.out, args.part_mib)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bundle"
        site = root / "site"
        site.mkdir(parents=True)
        dists = closure(ROOTS, {norm(n) for n in args.have} | SKIP)
        for dist in sorted(dists, key=lambda d: norm(d.metadata["Name"])):
            name = norm(dist.metadata["Name"])
            if is_pure(dist) or name.startswith("nvidia-"):
                copy_dist(dist, site)
            else:
                wheels = Path(tmp) / "wheels" / name
                wheels.mkdir(parents=True)
                fetch_wheel(dist, args.python, site, wheels)
            print(f"  {name} {dist.version}")
        pack_triton(args.python, site, root / "bin")
        # The python backend stub of Triton 2.51 returns empty output tensors under
        # numpy 2 (seen on the H100 image): the server's Python gets numpy 1.26 first.
        stub_site = root / "stub-site"
        stub_site.mkdir()
        fetch_wheel(md.distribution("numpy"), args.python, stub_site, Path(tmp) / "numpy1")
        args.out.mkdir(parents=True, exist_ok=True)
        archive = args.out / f"offline-py{args.python}.tar.xz"
        # the strongest xz preset: the bundle and the working tree share a lent
        # machine's 64 MiB a call (-9e: 50.4 MB where the default made 52.6)
        with tarfile.open(archive, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tar:
            for item in sorted(root.iterdir()):
                tar.add(item, arcname=item.name, filter=without_tests)
    print(f"{archive}: {archive.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
