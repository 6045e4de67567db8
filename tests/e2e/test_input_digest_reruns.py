"""What a dry run names missing, and what a replaced checkpoint or data file re-runs
whatever its mtime, under the real Snakemake."""

import os
import re
import shutil

import yaml

from testkit.input_digest import _set_back
from testkit.workflow import ROOT, corrupt_tensor_bytes, planned_jobs, snakemake, tiny_models


# the real Snakemake
def test_a_missing_checkpoint_and_dataset_are_named_by_a_dry_run(tmp_path):
    """Both named at once, before any job, in a dry run as in a real one (`deploybench
    plan`): a dry run used to plan around them (naming, at most, the first one met)."""
    checkpoint, data = tmp_path / "gone" / "checkpoint.pt", tmp_path / "gone" / "electricity"
    work = tmp_path / "work"
    work.mkdir()
    result = snakemake(work, "-n", "--config", tiny_models(
        tmp_path, weights={"checkpoint": str(checkpoint)}, data={"path": str(data)}),
        check=False)
    assert result.returncode != 0
    assert (f"model 'tft-tiny': weights.checkpoint '{checkpoint}' and data.path '{data}' do "
            "not exist") in result.stdout + result.stderr, result.stdout + result.stderr
    assert not planned_jobs(result)


def test_a_replaced_checkpoint_or_data_file_reruns_what_read_it_whatever_its_mtime(tmp_path):
    """The user's checkpoint and dataset are inputs by their content (their stamps,
    deploybench.settings.input_digest): a file replaced with other bytes and an older mtime, or a
    swapped data folder, re-runs what read it; a touch re-runs nothing; a checkpoint whose
    tensor bytes are damaged is refused, naming it; a folder of far too many files is
    refused before any job, naming it."""
    import torch

    from deploybench.models import tft

    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    data, other = tmp_path / "data", tmp_path / "other"
    tft.generate_dataset(model["hparams"], str(data), **model["data"]["generate"])
    tft.generate_dataset(model["hparams"], str(other), **{**model["data"]["generate"],
                                                           "seed": 9})
    checkpoint, retrained = tmp_path / "checkpoint.pt", tmp_path / "retrained.pt"
    for path, seed in ((checkpoint, 4), (retrained, 5)):
        torch.save({"model": tft.build_model(model["hparams"], None, seed).model.state_dict()},
                   path)
    models = tiny_models(tmp_path, data={"path": str(data)},
                          weights={"checkpoint": str(checkpoint)})
    work = tmp_path / "work"
    work.mkdir()
    target = "results/tft-tiny/source/eval.npz"

    def plan() -> dict[str, int]:
        return planned_jobs(snakemake(work, "-n", target, "--config", models))

    snakemake(work, target, "--config", models)
    evaluated = (work / target).read_bytes()
    # touched, the same bytes: nothing to do
    os.utime(checkpoint)
    os.utime(data / "test.bin")
    assert plan() == {}
    # other bytes, an older mtime (as `cp -p other/test.bin data/` leaves it)
    shutil.copy2(other / "test.bin", data / "test.bin")
    _set_back(data / "test.bin")
    assert plan() == {"eval_set": 1}
    shutil.copy2(retrained, checkpoint)
    _set_back(checkpoint)
    assert plan() == {"weights": 1, "eval_set": 1}
    snakemake(work, target, "--config", models)
    assert (work / target).read_bytes() != evaluated
    assert plan() == {}
    # a swapped data folder, its files as old as ever
    data.rename(tmp_path / "data.old")
    other.rename(data)
    assert plan() == {"eval_set": 1}
    # damaged tensor bytes (size unchanged, an older mtime): refused, naming the file
    corrupt_tensor_bytes(checkpoint)
    _set_back(checkpoint)
    result = snakemake(work, target, "--config", models, check=False)
    assert result.returncode != 0
    log = (work / "results/tft-tiny/source/logs/weights.log").read_text()
    assert re.search(rf"TFT checkpoint '{re.escape(str(checkpoint))}' is corrupt: its entry "
                     r"'retrained/data/\d+' fails the zip CRC check", log), log
    # a data.path of far too many files (`data.path: /usr`): refused while planning (the
    # bound lowered to 3 in snakemake's process, as 10,000 files take a while to make)
    many = tmp_path / "many"
    many.mkdir()
    for i in range(4):
        (many / str(i)).touch()
    result = snakemake(work, "-n", target, "--config", tiny_models(
        tmp_path, data={"path": str(many)}), check=False,
        prelude="from deploybench.settings import input_digest\ninput_digest.MAX_FILES = 3")
    assert result.returncode != 0
    assert (f"model 'tft-tiny': data.path '{many}' holds more than 3 files: a checkpoint "
            "or a dataset folder is expected") in result.stdout + result.stderr
