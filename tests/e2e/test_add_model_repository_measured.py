"""A user's Triton model repository measured as it is, end to end."""

from __future__ import annotations

from deploybench.triton import config as triton_config
from testkit.add_model import RATES_OF_PEAK, deploybench, short_run
from testkit.add_model_repository import (
    add,
    files,  # noqa: F401 (a fixture)
)


def test_a_repository_is_measured_as_it_is(files, tmp_path):
    """`deploybench run` on the CPU key: the user's model folder served by the backend its
    config names (the pipeline's C++ backend), its ONNX file byte for byte; accuracy
    against the source model; offline, online, rate; no conversion or native, each said."""
    import pandas as pd

    result, path = add(files, "mine-repo", files / "repo", "--source", files / "mine.onnx",
                       "--force")
    assert result.returncode == 0, result.stderr
    run_file = short_run(files / "models", "mine-repo", "repository", tmp_path / "run.yaml")
    result = deploybench("run", "-m", "mine-repo", "-g", "cpu", "-b", "repository", "-p",
                         "fp32", "-c", run_file, "--", "--directory", tmp_path, "--cores", "2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = tmp_path / "results/mine-repo/cpu/repository_fp32"
    served = folder / "model_repository/mine-repo"
    assert (served / "1/model.onnx").read_bytes() == (files / "mine.onnx").read_bytes()
    assert triton_config.read(served / "config.pbtxt").backend == "deploybench"
    readme = (folder / "README.md").read_text()
    accuracy = pd.read_csv(folder / "accuracy.csv").set_index("name")
    assert accuracy.loc["max_abs_deviation:y", "triton"] < 1e-5
    assert "- **Accuracy** against the source model: passed" in readme
    assert "Not measured: a Triton model repository is served as it is" in readme
    assert "no converted model or runner of ours to run in-process" in readme
    assert not (folder / "conversion_check.csv").exists() and not (folder / "native.csv").exists()
    offline = pd.read_csv(folder / "offline.csv")
    assert offline["Batch"].tolist() == [1, 4, 16]
    assert set(offline["Served by"]) == {"deploybench"}
    assert f"{offline['Inferences/Second'].max():,.0f} inf/s" in readme
    online = pd.read_csv(folder / "online.csv")
    peak = online.loc[online["Stable"], "Inferences/Second"].max()
    rate = pd.read_csv(folder / "rate.csv")
    assert rate["Offered (req/s)"].tolist() == [float(f"{f * peak:.3g}") for f in RATES_OF_PEAK]
