"""The quantized precisions (int8, int8-weight-only, fp8; issue 67): refused with the reason
where a format cannot carry one, a key or a device cannot run it, or a model declares no
tolerance for it; torchao's schemes on an exported program's linear layers; the accuracy
step's metric gate and the ship page that honours it. End to end on the CPU: the tiny TFT
quantized to INT8 both ways, compiled by AOTInductor and served by the C++ backend in the
real Triton, within its declared tolerance of the FP32 source; a tolerance set too tight
fails its accuracy gate with the numbers."""

import re

import pandas as pd
import pytest
import torch
import yaml

from deploybench import runners
from deploybench.backends import BACKENDS, PRECISIONS, QUANTIZED, carriers
from deploybench.records.tables import require_accurate
from deploybench.reporting.headline import _accuracy, accuracy_text
from deploybench.reporting.ship import candidates, ship_page
from deploybench.runners.quantization import (
    SCHEMES,
    as_linears,
    quantize,
    refusal,
    sample_rows,
    unfit,
)
from deploybench.settings.config import ConfigError
from deploybench.steps.accuracy import metric_changes
from testkit.scenario_tables import measured
from testkit.workflow import ROOT

CPU = torch.device("cpu")


# ---- refused while the DAG is built ---------------------------------------------------

@pytest.mark.parametrize(("key", "message"), [
    (("tft-tiny", "cpu", "aoti", "fp8"),
     "precision 'fp8' cannot run on GPU key 'cpu' (cpu); it runs fp32, int8, int8-weight-only; "
     "fp8 needs an NVIDIA GPU of compute capability 8.9 or later: GPU keys h100, h200"),
    (("tft-tiny", "a100", "aoti", "fp8"),
     "precision 'fp8' cannot run on GPU key 'a100' (gpu); it runs fp32, fp16; fp8 needs"),
    (("tft-tiny", "a100", "aoti", "int8"),
     "precision 'int8' cannot run on GPU key 'a100' (gpu); it runs fp32, fp16; GPU keys that "
     "run it: cpu, h100, h200"),
    (("tft-tiny", "cpu", "onnx", "int8"),
     "backend 'onnx' (ONNX Runtime) does not carry precision 'int8': it carries fp32, fp16; "
     "int8 is carried by aoti, torch-compile, aoti-cg"),
    (("tft-tiny", "cpu", "ts-trace", "int8-weight-only"),
     "backend 'ts-trace' (PyTorch (TorchScript trace)) does not carry precision "
     "'int8-weight-only'"),
    (("bert-tiny", "cpu", "aoti", "int8"),
     "model 'bert-tiny' declares no tolerance for precision 'int8': set "
     "conversion.tolerance.int8, accuracy.max_abs_deviation.int8, "
     "accuracy.metric_tolerance.int8"),
    (("tft-tiny", "h100", "torch-compile", "fp8"),
     "model 'tft-tiny' declares no tolerance for precision 'fp8'"),
])
def test_a_precision_is_refused_where_it_cannot_run_with_the_reason(settings, key, message):
    with pytest.raises(ConfigError) as refused:
        settings.run(*key)
    assert message in str(refused.value)


def test_a_quantized_key_resolves_and_every_others_settings_stay_as_they_were(settings):
    run = settings.run("tft-tiny", "cpu", "aoti", "int8")
    assert run["precision"] == "int8" and "export_precision" not in run  # the FP32 export
    for key in (("tft-tiny", "cpu", "aoti", "fp32"), ("tft-tiny", "cpu", "onnx", "fp32")):
        assert set(settings.run(*key)["backend"]) == {
            "key", "title", "export", "artifact", "runner", "triton_backend", "needs_gpu"}
    assert carriers("int8") == ["aoti", "torch-compile", "aoti-cg"]
    assert [k for k, b in BACKENDS.items() if set(QUANTIZED) & set(b.precisions)] == \
        carriers("fp8")


def test_the_schemas_and_the_cpp_backend_know_the_registrys_precisions():
    """Where a precision is named outside backends.PRECISIONS, it is the same list."""
    schema = yaml.safe_load((ROOT / "config/schema/gpus.schema.yaml").read_text())
    assert tuple(schema["additionalProperties"]["properties"]["precisions"]["items"]["enum"]) \
        == PRECISIONS
    main = yaml.safe_load((ROOT / "config/schema/config.schema.yaml").read_text())
    assert tuple(main["properties"]["targets"]["items"]["properties"]["precision"]["enum"]) \
        == PRECISIONS
    model = yaml.safe_load((ROOT / "config/schema/model.schema.yaml").read_text())
    for where in ("tolerance", "max_abs_deviation", "metric_tolerance"):
        section = model["properties"]["conversion" if where == "tolerance" else "accuracy"]
        assert set(PRECISIONS) <= set(section["properties"][where]["properties"]), where
    engine = (ROOT / "triton_backend/engine.cc").read_text()
    known = re.search(r"known\{(\"fp32\"[^}]*)\}", engine).group(1)
    assert tuple(re.findall(r'"([^"]+)"', known)) == PRECISIONS
    assert "valid: " + ", ".join(PRECISIONS) in (ROOT / "triton_backend/model.cc").read_text()


# ---- torchao on an exported program ---------------------------------------------------

class Tied(torch.nn.Module):
    """Two linear layers and an embedding whose table a third linear reads (tied)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16, bias=False)
        self.table = torch.nn.Embedding(10, 16)

    def forward(self, x, ids):
        y = self.b(torch.relu(self.a(x)))
        return y + self.table(ids), y @ self.table.weight.t()


def exported_module(model, *args):
    torch.manual_seed(0)
    return torch.export.export(model.eval(), args).module()


def test_int8_quantizes_the_linear_layers_and_leaves_a_shared_weight_alone():
    torch.manual_seed(0)
    x, ids = torch.randn(4, 32), torch.tensor([1, 2, 3, 4])
    for precision in ("int8", "int8-weight-only"):
        module = exported_module(Tied(), x, ids)
        with torch.no_grad():
            before = module(x, ids)
        assert quantize(module, precision, CPU) == 2
        weights = {type(m.weight).__name__ for m in module.modules()
                   if isinstance(m, torch.nn.Linear)}
        assert weights == {"Int8Tensor"}, weights
        assert module.a.weight.qdata.dtype == torch.int8
        assert module.table.weight.dtype == torch.float32  # the tied table: FP32
        with torch.no_grad():
            after = module(x, ids)
        moved = max(float((a - b).abs().max()) for a, b in zip(after, before))
        assert 0 < moved < 0.05 * max(float(b.abs().max()) for b in before), moved


class Shapes(torch.nn.Module):
    """Three linear layers as CUDA's INT8 matmul sees them at batch 1: one fed the batch
    alone (1 row a sample), one fed 20 time steps a sample, one 2 wide (BERT's answer
    head)."""

    def __init__(self):
        super().__init__()
        self.pooled, self.steps, self.head = (torch.nn.Linear(32, 32), torch.nn.Linear(32, 32),
                                              torch.nn.Linear(32, 2))

    def forward(self, x, seq):
        return self.pooled(x), self.head(self.steps(seq))


def test_layers_cudas_int8_matmul_cannot_take_stay_as_they_are_on_a_gpu():
    """Measured on an H100 (2026-12-07): `_int_mm` refused BERT's 2-wide answer head at run
    time, and needs more than 16 rows. The rows a sample are read from the exported
    program's shapes at batch 1, whatever the example's batch."""
    x, seq = torch.randn(4, 32), torch.randn(4, 20, 32)
    batch = torch.export.Dim("batch", min=1, max=64)
    module = torch.export.export(Shapes().eval(), (x, seq),
                                 dynamic_shapes=({0: batch}, {0: batch})).module()
    assert sample_rows(module) == {"pooled": 1, "steps": 20, "head": 20}
    gpu = torch.device("cuda")
    assert "more than 16 rows, and this layer gets 1 a sample" in unfit("int8", gpu, (32, 32), 1)
    assert unfit("int8", gpu, (32, 32), 17) is None and unfit("int8", gpu, (32, 32), 16)
    assert "multiple of 8 (32 -> 2)" in unfit("int8", gpu, (2, 32), 20)
    assert unfit("int8", CPU, (2, 32), 1) is None  # the CPU's kernel takes any shape
    assert "blockwise" in unfit("fp8", gpu, (128, 128), 20)
    assert unfit("fp8", gpu, (256, 128), 20) is None
    assert unfit("int8-weight-only", gpu, (2, 32), 1) is None
    assert quantize(module, "int8", gpu) == 1  # steps alone
    kinds = {n: type(m.weight).__name__ for n, m in module.named_modules()
             if isinstance(m, torch.nn.Linear)}
    assert kinds == {"pooled": "Parameter", "steps": "Int8Tensor", "head": "Parameter"}, kinds
    cpu = torch.export.export(Shapes().eval(), (x, seq)).module()
    assert quantize(cpu, "int8", CPU) == 3


def test_a_model_without_a_linear_layer_of_its_own_is_refused():
    module = exported_module(torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3)), torch.randn(2, 4, 8))
    assert as_linears(module) == (0, 0)
    with pytest.raises(ValueError, match="torchao quantized no linear layer of the model "
                                         r"\(0 aten.linear calls, 0 on a weight of their own\)"
                                         "; it would run in FP32 under another name"):
        quantize(module, "int8", CPU)


def test_fp8_is_refused_on_the_cpu_by_the_convert_step_and_the_runner():
    assert SCHEMES["fp8"].min_capability == (8, 9)
    said = refusal("fp8", CPU)
    assert said.startswith("precision 'fp8' (FP8 E4M3 weights and activations")
    assert said.endswith("needs an NVIDIA GPU of compute capability 8.9 or later; this runs "
                         "on the CPU")
    assert refusal("int8", CPU) is None and refusal("fp32", CPU) is None
    module = exported_module(torch.nn.Linear(8, 8), torch.randn(2, 8))
    with pytest.raises(runners.RunnerUnavailable, match="compute capability 8.9"):
        quantize(module, "fp8", CPU)
    with pytest.raises(runners.RunnerUnavailable, match="this runs on the CPU"):
        runners.load("aoti", ROOT / "no-such.pt2", runners.Options(("x",), precision="fp8"))


# ---- the accuracy gate and the pages that honour it -----------------------------------

def accuracy_table(folder, served: float, source: float, rtol: float):
    """A tft accuracy.csv of one metric and one deviation, the metric gated at rtol."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"name": "p50_risk", "kind": "metric", "triton": served, "source": source,
             "limit": None, "passed": None},
            *metric_changes({"metric_tolerance": {"int8": {"atol": 0.0, "rtol": rtol}}},
                            "int8", {"p50_risk": served}, {"p50_risk": source}),
            {"name": "max_abs_deviation:target__0", "kind": "deviation", "triton": 0.02,
             "source": 0.0, "limit": 0.1, "passed": True}]
    pd.DataFrame(rows).to_csv(folder / "accuracy.csv", index=False)
    return folder / "accuracy.csv"


def test_a_metric_that_moves_past_its_tolerance_fails_with_its_numbers(tmp_path):
    # limit 0.02 * 0.5 = 0.01: a move of 0.0095 passes, 0.0105 (5 % past it) fails
    require_accurate(accuracy_table(tmp_path / "in", 0.5095, 0.5, 0.02))
    assert _accuracy(tmp_path / "in/accuracy.csv")["passed"]
    for served in (0.5105, 0.4895, float("nan")):  # from either side; NaN fails
        csv = accuracy_table(tmp_path / f"out{served}", served, 0.5, 0.02)
        with pytest.raises(ValueError) as failed:
            require_accurate(csv)
        assert f"p50_risk {served:.4g} served against 0.5 from the source model: moved" \
            in str(failed.value)
        assert "> 0.01); not benchmarking" in str(failed.value)
        found = _accuracy(csv)
        assert not found["passed"]
    text = accuracy_text({"accuracy": _accuracy(tmp_path / "out0.5105/accuracy.csv")})
    assert text.startswith("failed: largest deviation from the source model 0.02 (limit 0.1")
    assert "p50_risk moved 0.0105 from the source model's (limit 0.01)" in text
    overridden = metric_changes({"metric_tolerance": {"int8": {
        "atol": 0.0, "rtol": 0.0, "metrics": {"f1": {"atol": 1.0}}}}}, "int8",
        {"f1": 80.5, "exact_match": 70.0}, {"f1": 80.0, "exact_match": 70.0})
    assert [(r["name"], r["limit"], r["passed"]) for r in overridden] == [
        ("metric_change:f1", 1.0, True), ("metric_change:exact_match", 0.0, True)]
    assert metric_changes({}, "int8", {"f1": 1.0}, {"f1": 0.0}) == []  # none declared


def test_the_ship_page_chooses_a_quantized_configuration_only_where_its_accuracy_passed(
        tmp_path):
    gpu = tmp_path / "results/tft/h100"
    measured(gpu / "aoti_fp16", [(32, 50_000, 20.0, True)])
    accuracy_table(measured(gpu / "aoti_int8", [(32, 90_000, 20.0, True)]), 0.52, 0.5, 0.02)
    measured(gpu / "aoti-cg_fp8", [(32, 95_000, 20.0, True)])  # no accuracy.csv
    accuracy_table(gpu / "aoti_int8-weight-only", 0.505, 0.5, 0.02)  # a passing search point
    measured(gpu / "aoti_int8-weight-only/search/i2", [(32, 70_000, 20.0, True)])
    ranked = [c["folder"].relative_to(gpu).as_posix() for c in candidates(gpu, 25)]
    assert ranked == ["aoti_int8-weight-only/search/i2", "aoti_fp16"], ranked
    page = ship_page("TFT", "h100", gpu, 25)
    assert "**Ship `aoti_int8-weight-only/search/i2`**: 70,000 inferences/s" in page
    assert "## Left out: quantized, accuracy not passed" in page
    assert ("- aoti_int8: accuracy failed (p50_risk 0.52 served against 0.5 from the source "
            "model: moved 0.02 > 0.01)") in page
    assert "- aoti-cg_fp8: no accuracy.csv, so its accuracy was not gated" in page
    accuracy_table(gpu / "aoti_int8", 0.509, 0.5, 0.02)  # measured again, within it
    assert "**Ship `aoti_int8`**: 90,000 inferences/s" in ship_page("TFT", "h100", gpu, 25)
