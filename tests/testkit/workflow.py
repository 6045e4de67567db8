"""The tests' view of the repository: its paths, the tiny config merged as Snakemake
would, the real Snakemake run on it, and what a dry run plans."""

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "config" / "tiny.yaml"
# model_overrides for a test that measures the tiny TFT again and needs only some level of
# each scenario: one, without warm-up
ONE_LEVEL = {"tft-tiny": {"offline": {"batch_sizes": [4], "warmup_windows": 0},
                          "online": {"concurrency": [2], "warmup_windows": 0}}}


def main_config(**overrides) -> dict:
    """The main config with the tiny test config merged in, as Snakemake would."""
    from deploybench.settings.config import deep_merge

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = deep_merge(config, yaml.safe_load(TINY.read_text()))
    return deep_merge(config, overrides)


def reference_opset(model: str) -> int:
    """The ONNX opset a model's reference exported with (its config's export.onnx_opset)."""
    config = yaml.safe_load((ROOT / "config" / "models" / f"{model}.yaml").read_text())
    return config["export"]["onnx_opset"]


def snakemake(workdir: Path, *args: str, check: bool = True, profile: str | None = None,
              project: Path = ROOT, prelude: str = "") -> subprocess.CompletedProcess:
    """Run the real snakemake on the repository's Snakefile with the tiny config, locally
    or with one of the repository's workflow profiles (e.g. "slurm"); `project`: another
    copy of the repository, whose Snakefile and package run instead; `prelude`: Python run
    in snakemake's process before its command line (not in the jobs it starts)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if project != ROOT:
        env["PYTHONPATH"] = f"{project / 'scripts'}{os.pathsep}{env['PYTHONPATH']}"
    main = ["-c", f"{prelude}\nfrom snakemake.cli import main\nmain()"] if prelude else [
        "-m", "snakemake"]
    cmd = [sys.executable, *main, "--snakefile", str(project / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(TINY)]
    if profile:
        cmd += ["--workflow-profile", str(ROOT / "profiles" / profile), *args]
    else:  # --resources after args: it takes several values
        cmd += ["-c2", *args, "--resources", "bench_slot=1"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if check and result.returncode != 0:
        logs = "\n".join(
            f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(workdir.rglob("logs/*.log"))
        )
        raise AssertionError(f"snakemake failed:\n{result.stdout[-4000:]}\n"
                             f"{result.stderr[-6000:]}\n{logs}")
    return result


def measuring_rules() -> set[str]:
    """The rules of the measuring group (`group: DEVICE_GROUP` in rules/*.smk, and those a
    `use rule` derives from them): a configuration's steps that share one cluster job."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "rules").glob("*.smk")))
    grouped = set(re.findall(r"^(?:rule|checkpoint) (\w+):(?:\n    .*)*?\n    group:\n"
                             r"        DEVICE_GROUP", text, re.M))
    for base, derived in re.findall(r"^use rule (\w+) as (\w+)", text, re.M):
        if base in grouped:
            grouped.add(derived)
    return grouped


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """rule -> count of a dry-run's job table."""
    table = re.search(r"^job\s+count\n-+\s+-+\n(.*?)^total", result.stdout, re.M | re.S)
    if not table:
        return {}
    return {line.split()[0]: int(line.split()[1]) for line in table.group(1).splitlines()}


def corrupt_tensor_bytes(path: Path) -> Path:
    """A zip checkpoint (torch.save) with one byte of its largest tensor flipped, its size
    and names unchanged: torch itself would load it, as other weights."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as z:
        entry = max((i for i in z.infolist() if "/data/" in i.filename),
                    key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack("<HH", data[entry.header_offset + 26:
                                                    entry.header_offset + 30])
    data[entry.header_offset + 30 + name_len + extra_len + entry.file_size // 2] ^= 0xFF
    path.write_bytes(data)
    return path


def copy_build(build: Path, to: Path) -> Path:
    """A copy of a built workdir (results, Snakemake's records, their times) at `to`."""
    shutil.copytree(build, to, symlinks=True)
    return to


def needs(module: str):
    """An optional package a test needs (the tf extra, scikit-learn): the test is skipped
    where it is not installed, and fails under CI, which installs every extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"'{module}' is not installed: CI installs every extra "
                        "(scripts/setup.sh)", pytrace=False)
        pytest.skip(f"'{module}' is not installed", allow_module_level=True)


def tiny_models(tmp_path, **changes) -> str:
    """A models folder with tft-tiny's config changed: `--config models_dir=<it>`."""
    from deploybench.settings.config import deep_merge

    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    (models / "tft-tiny.yaml").write_text(yaml.safe_dump(deep_merge(model, changes)))
    return f"models_dir={models}"
