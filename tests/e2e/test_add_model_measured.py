"""`deploybench add-model` end to end: an ONNX model measured as the tiny models are, and
the other formats converted."""

from __future__ import annotations

from testkit.add_model import (
    RATES_OF_PEAK,
    TORCHSCRIPT_INPUTS,
    add,
    deploybench,
    files,  # noqa: F401 (a fixture)
    short_run,
)


def test_an_onnx_model_is_measured_end_to_end_and_the_others_convert(files, tmp_path):
    """`deploybench run` of the ONNX model on the CPU key: the configuration's report with
    offline, online, rate (at fractions of its online peak), served/native and the accuracy
    check against the user's file; the
    TorchScript and .pt2 files through their conversion and its check."""
    for suffix, extra in (("onnx", []), ("pt", TORCHSCRIPT_INPUTS), ("pt2", [])):
        assert add(files, f"mine-{suffix}", suffix, "--force", *extra)[0].returncode == 0
    run_file = short_run(files / "models", "mine-onnx", "onnx", tmp_path / "run.yaml")
    work = ["--", "--directory", tmp_path, "--cores", "2"]
    result = deploybench("run", "-m", "mine-onnx", "-g", "cpu", "-b", "onnx", "-p", "fp32",
                         "-c", run_file, *work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = tmp_path / "results/mine-onnx/cpu/onnx_fp32"
    readme = (folder / "README.md").read_text()
    for line in ("- **Offline** (best of the batch sweep):", "- **Online** peak:",
                 "- **Served/native** at the largest batch:",
                 "- **Accuracy** against the source model: passed"):
        assert line in readme
    assert f"| Weights | the model file {files / 'mine.onnx'}" in readme
    import pandas as pd

    assert pd.read_csv(folder / "offline.csv")["Batch"].tolist() == [1, 8, 32]
    # the rates offered were the fractions of the online sweep's peak, requests of one
    online = pd.read_csv(folder / "online.csv")
    peak = online.loc[online["Stable"], "Inferences/Second"].max()
    rate = pd.read_csv(folder / "rate.csv")
    assert rate["Offered (req/s)"].tolist() == [float(f"{f * peak:.3g}")
                                                          for f in RATES_OF_PEAK]
    assert "Maximum rate with p99 within 100 ms" in readme or \
        "No rate measured kept p99 within 100 ms" in readme or \
        "Every rate measured kept p99 within 100 ms" in readme
    assert "of the online sweep's peak" in readme
    accuracy = pd.read_csv(folder / "accuracy.csv")
    assert accuracy.loc[accuracy["kind"] == "deviation", "triton"].max() < 1e-5
    # its own format exported as the file itself, byte for byte
    exported = tmp_path / "results/mine-onnx/export/onnx/model.onnx"
    assert exported.read_bytes() == (files / "mine.onnx").read_bytes()
    checks = ["results/mine-pt/cpu/ts-script_fp32/conversion_check.csv",
              "results/mine-pt2/cpu/aoti_fp32/conversion_check.csv"]
    result = deploybench("run", *checks, "-c", run_file, *work)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for check in checks:
        table = pd.read_csv(tmp_path / check)
        assert table["passed"].all() and table["max_abs_error"].max() < 1e-5
