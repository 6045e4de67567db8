"""Configs that try to run code or exhaust memory, under the real Snakemake."""

import time

import yaml

from deploybench.models import tft
from testkit.security import TFT_TINY, alias_bomb
from testkit.workflow import ROOT, snakemake


def test_shell_syntax_in_a_config_path_is_a_path(tmp_path):
    """data.path with spaces and `$(...)` reaches the eval_set rule: it is read as a
    folder, and the command substitution never runs (no step goes through a shell)."""
    marker = tmp_path / "payload-ran"
    data = tmp_path / f"my data $(touch {marker})"
    tft.generate_dataset(TFT_TINY, str(data), seed=0, n_ids=7, n_timesteps=40)
    models = tmp_path / "models"
    models.mkdir()
    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    model["data"]["path"] = str(data)
    (models / "tft-tiny.yaml").write_text(yaml.safe_dump(model))
    work = tmp_path / "work"
    work.mkdir()
    snakemake(work, "results/tft-tiny/source/eval.npz", "--config", f"models_dir={models}")
    assert (work / "results/tft-tiny/source/eval.npz").stat().st_size > 0
    assert not marker.exists()


# A main config whose Python Snakemake's YTE would run: a statement and an expression.
YTE = """__use_yte__: true
__definitions__:
  - open({marker!r}, "w").write("a definition ran")
perf:
  attempts: ?open({marker!r}, "w").write("an expression ran") and 3
"""


# the real Snakemake, a dry run
def test_a_yte_main_config_runs_no_code_in_a_dry_run(tmp_path):
    """Snakemake reads a --configfile with `__use_yte__` as a YTE template before the
    Snakefile runs: the workflow profile refuses it before that."""
    marker = tmp_path / "payload-ran"
    config = tmp_path / "yte.yaml"
    config.write_text(YTE.format(marker=str(marker)))
    result = snakemake(tmp_path, "-n", "--configfile", str(config), check=False)
    assert result.returncode != 0
    assert f"configuration file '{config}' sets __use_yte__" in result.stderr
    assert not marker.exists()
    # without a profile, Snakemake runs it; the Snakefile still refuses the config
    result = snakemake(tmp_path, "-n", "--workflow-profile", "none", "--configfile",
                       str(config), check=False)
    said = result.stdout + result.stderr
    assert result.returncode != 0 and f"configuration file '{config}' sets __use_yte__" in said


# the real Snakemake, a dry run
def test_an_alias_bomb_in_the_main_config_is_refused_at_once(tmp_path):
    """Snakemake's own reading shares the aliased nodes; validation walked them for minutes
    until memory ran out. The alarm ends a run that gets that far."""
    bomb = alias_bomb(tmp_path / "bomb.yaml")
    start = time.monotonic()
    result = snakemake(tmp_path, "-n", "--configfile", str(bomb), check=False,
                       prelude="import signal; signal.alarm(30)")
    took = time.monotonic() - start
    assert result.returncode == 1, result.stderr[-2000:]
    assert (f"configuration file '{bomb}': its aliases (*l2 and those before it) expand to "
            "more than 10,000 nodes") in result.stderr
    assert took < 10, took  # Snakemake's own start-up: about 1 s
