import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "config" / "tiny.yaml"


def main_config(**overrides) -> dict:
    """The main config with the tiny test config merged in, as Snakemake would."""
    from deploybench.config import deep_merge

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config = deep_merge(config, yaml.safe_load(TINY.read_text()))
    return deep_merge(config, overrides)


def snakemake(workdir: Path, *args: str, check: bool = True,
              profile: str | None = None) -> subprocess.CompletedProcess:
    """Run the real snakemake on the repository's Snakefile with the tiny config, locally
    or with one of the repository's workflow profiles (e.g. "slurm")."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
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


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """rule -> count of a dry-run's job table."""
    table = re.search(r"^job\s+count\n-+\s+-+\n(.*?)^total", result.stdout, re.M | re.S)
    if not table:
        return {}
    return {line.split()[0]: int(line.split()[1]) for line in table.group(1).splitlines()}


@pytest.fixture(scope="session")
def settings():
    from deploybench.config import Settings

    return Settings(main_config())
