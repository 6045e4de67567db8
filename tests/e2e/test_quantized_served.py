"""The quantized configurations built, served and measured by the real pipeline."""

import json
import re
import shutil
import zipfile

import pandas as pd
import pytest
import yaml

from deploybench.reporting.headline import configuration_headline
from deploybench.runners.quantization import SCHEMES
from deploybench.triton import config as triton_config
from deploybench.triton import install
from deploybench.triton.server import ServerError, TritonServer
from testkit.measured import check_measurements
from testkit.workflow import TINY, snakemake

# ---- end to end on the CPU: the tiny TFT through AOTInductor and the C++ backend ------

INT8 = "results/tft-tiny/cpu/aoti_int8"
WEIGHT_ONLY = "results/tft-tiny/cpu/aoti_int8-weight-only"


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """Both packages compiled and checked first, then int8 measured: its measurements never
    overlap the other's compile (Snakemake runs two jobs at once)."""
    work = tmp_path_factory.mktemp("quantized")
    snakemake(work, f"{INT8}/conversion_check.csv", f"{WEIGHT_ONLY}/accuracy.csv")
    snakemake(work, *(f"{INT8}/{name}.csv" for name in ("offline", "native", "floor")))
    return work


def package_code(package) -> str:
    """The C++ of an AOTInductor package's wrapper (what its library runs)."""
    with zipfile.ZipFile(package) as pt2:
        return "".join(pt2.read(n).decode() for n in pt2.namelist()
                       if n.endswith(".wrapper.cpp"))


def test_int8_both_ways_served_by_the_cpp_backend_within_the_declared_tolerance(
        quantized, settings):
    for run_dir, precision in ((INT8, "int8"), (WEIGHT_ONLY, "int8-weight-only")):
        folder, model = quantized / run_dir, settings.run("tft-tiny", "cpu", "aoti",
                                                           precision)["model"]
        # quantized: further from the FP32 source than an FP32 conversion (1e-4), within
        # the declared tolerance
        check = pd.read_csv(folder / "conversion_check.csv")
        assert check["passed"].all() and (check["max_abs_error"] > 1e-3).all(), check
        # the package holds INT8 weights; int8 multiplies in INT8, weight-only in FP32
        code = package_code(folder / "converted/model.pt2")
        assert "cached_torch_dtype_int8" in code
        assert ("aoti_torch_cpu__int_mm_out" in code) == (precision == "int8"), precision
        accuracy = pd.read_csv(folder / "accuracy.csv").set_index("name")
        tol = model["accuracy"]["metric_tolerance"][precision]
        risks = accuracy[accuracy["kind"] == "metric"]
        assert list(risks.index) == ["p10_risk", "p50_risk", "p90_risk"]
        for name, row in risks.iterrows():  # the gate, recomputed from the two metrics
            moved, limit = abs(row["triton"] - row["source"]), tol["rtol"] * abs(row["source"])
            change = accuracy.loc[f"metric_change:{name}"]
            assert change["triton"] == pytest.approx(moved, rel=1e-9) and moved > 0
            assert change["limit"] == pytest.approx(limit, rel=1e-9) and moved <= limit
            assert str(change["passed"]) == "True"
        deviation = accuracy.loc["max_abs_deviation:target__0"]
        assert deviation["limit"] == model["accuracy"]["max_abs_deviation"][precision]
        # what the C++ backend served is what the package gave in-process
        assert deviation["triton"] == pytest.approx(check["max_abs_error"].max(), rel=1e-6)
        report = json.loads((folder / "accuracy.json").read_text())
        assert report["provenance"]["server"]["served_by"] == "deploybench"
        assert report["quantization"]["config"] == SCHEMES[precision].config
        assert report["quantization"]["calibration"].startswith("none, no data read")


def test_int8_is_measured_natively_and_against_its_floor_as_every_configuration(
        quantized, settings):
    folder = quantized / INT8
    check_measurements(folder, settings.run("tft-tiny", "cpu", "aoti", "int8")["model"],
                       online=False)
    assert set(pd.read_csv(folder / "offline.csv")["Served by"]) == {"deploybench"}
    ratio = configuration_headline(folder / "offline.csv",
                                   native=folder / "native.csv")["served_native"]
    assert ratio["batch"] == 4 and ratio["shared_memory"] == "system", ratio
    if ratio["ratio"] is None:  # a side measured beside other load (a busy host) leaves none
        assert re.fullmatch(r"left out: (served|native) ran beside other load, "
                            r"(served|native) did not", ratio["why"]), ratio
    else:  # the served rate over native's at batch 4, to 3 decimals
        served = pd.read_csv(folder / "offline.csv").query("Batch == 4")
        native = pd.read_csv(folder / "native.csv").query("Batch == 4")
        assert ratio["ratio"] == pytest.approx(
            served["Inferences/Second"].max() / native["Inferences/Second"].iloc[0], abs=1e-3)


def test_a_tolerance_set_too_tight_fails_the_accuracy_gate_with_the_numbers(quantized,
                                                                           tmp_path):
    tight = tmp_path / "tight.yaml"
    tight.write_text(yaml.safe_dump({"model_overrides": {"tft-tiny": {"accuracy": {
        "metric_tolerance": {"int8-weight-only": {"atol": 0.0, "rtol": 1e-5}}}}}}))
    result = snakemake(quantized, f"{WEIGHT_ONLY}/offline.csv", "--configfile", str(TINY),
                       str(tight), check=False)
    assert result.returncode != 0
    folder = quantized / WEIGHT_ONLY
    accuracy = pd.read_csv(folder / "accuracy.csv").set_index("name")  # measured again
    log = (folder / "logs/offline.log").read_text()
    assert "not benchmarking" in log and not (folder / "offline.csv").exists()
    for name in ("p10_risk", "p50_risk", "p90_risk"):
        served, source = accuracy.loc[name, ["triton", "source"]]
        change = accuracy.loc[f"metric_change:{name}"]
        assert str(change["passed"]) == "False"
        assert change["limit"] == pytest.approx(1e-5 * abs(source), rel=1e-9)
        assert (f"{name} {served:.4g} served against {source:.4g} from the source model: "
                f"moved {change['triton']:.3g} > {change['limit']:.3g}") in log


def test_the_cpp_backend_refuses_fp8_on_a_cpu_instance_naming_why(quantized, tmp_path):
    repo = shutil.copytree(quantized / INT8 / "model_repository", tmp_path / "repo")
    config = triton_config.read(repo / "tft-tiny/config.pbtxt")
    config.parameters["precision"].string_value = "fp8"
    triton_config.write(config, repo / "tft-tiny/config.pbtxt")
    with pytest.raises(ServerError, match=r"instance 'tft-tiny_0_0': precision 'fp8' needs an "
                                          r"NVIDIA GPU of compute capability 8.9 or later; "
                                          r"this instance runs on the CPU"):
        with TritonServer(install.prepare(), repo, tmp_path / "fp8.log", "tft-tiny"):
            pass
