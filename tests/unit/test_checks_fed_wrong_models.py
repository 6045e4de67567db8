"""The conversion check and accuracy on Triton fed converted models wrong by a known amount:
a real ONNX model (two outputs of three values, x @ W + b) run by the pipeline's ONNX Runtime
runner, against the source model's outputs in an eval.npz worked out with numpy. A bias
0.01 off, or the two outputs swapped, fails; the right model passes; the error each reports
is the known one, so neither check can be reading one side twice."""

import contextlib
from types import SimpleNamespace

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import TensorProto, helper, numpy_helper

from deploybench.records.tables import require_accurate, require_passed
from deploybench.source import model as source_model
from deploybench.steps import accuracy as accuracy_step
from deploybench.steps.conversion_check import conversion_check

RNG = np.random.default_rng(3)
W = [RNG.uniform(-0.5, 0.5, (4, 3)).astype(np.float32) for _ in range(2)]
B = [RNG.uniform(-0.5, 0.5, 3).astype(np.float32) for _ in range(2)]
X = RNG.uniform(0, 1, (20, 4)).astype(np.float32)
MODEL = {"inputs": [{"name": "x", "dtype": "FP32", "dims": [4]}],
         "outputs": [{"name": "y1", "dtype": "FP32", "dims": [3]},
                     {"name": "y2", "dtype": "FP32", "dims": [3]}],
         "conversion": {"batch_size": 8,
                        "tolerance": {"fp32": {"atol": 1.0e-4, "rtol": 1.0e-3}}},
         "accuracy": {"batch_size": 8, "max_abs_deviation": {"fp32": 1.0e-4}},
         "triton": {"max_batch_size": 8}, "plugin": "none", "hparams": {},
         "data": {"split": "test"}}
RUN = {"model": MODEL, "precision": "fp32", "gpu": {"kind": "cpu"},
       "backend": {"runner": "onnxruntime", "export": "onnx"}, "key": {"model": "toy"}}


def onnx_model(path, weights=W, biases=B, names=("y1", "y2")):
    """y_i = x @ weights[i] + biases[i], the outputs named `names` in that order."""
    nodes, inits = [], []
    for i, (w, b) in enumerate(zip(weights, biases)):
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [names[i]])]
    graph = helper.make_graph(
        nodes, "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3]) for n in ("y1", "y2")],
        inits)
    graph.output.sort(key=lambda o: o.name)  # the config's order: y1, y2
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def eval_set(tmp_path):
    """The source model's outputs, computed here with numpy."""
    reference = [X @ w + b for w, b in zip(W, B)]
    path = tmp_path / "eval.npz"
    source_model.save_eval(MODEL, [X], reference, [np.zeros(len(X))], path)
    return path


def checked(tmp_path, eval_set, **wrong) -> pd.DataFrame:
    converted = onnx_model(tmp_path / "converted.onnx", **wrong)
    conversion_check(RUN, converted, eval_set, tmp_path / "check.csv")
    return pd.read_csv(tmp_path / "check.csv").set_index("output")


def test_the_right_conversion_passes(tmp_path, eval_set):
    table = checked(tmp_path, eval_set)
    assert table["passed"].all() and (table["max_abs_error"] < 1e-6).all(), table
    assert (table["samples"] == 20).all()
    require_passed(tmp_path / "check.csv")


def test_a_bias_off_by_a_hundredth_fails_by_exactly_that_much(tmp_path, eval_set):
    table = checked(tmp_path, eval_set, biases=[B[0] + np.float32(0.01), B[1]])
    assert table.loc["y1", "max_abs_error"] == pytest.approx(0.01, abs=1e-6)
    assert table.loc["y1", "mean_abs_error"] == pytest.approx(0.01, abs=1e-6)
    assert not table.loc["y1", "passed"] and table.loc["y2", "passed"], table
    with pytest.raises(ValueError, match="conversion check .* failed for y1: max abs 0.01"):
        require_passed(tmp_path / "check.csv")


def test_weights_one_percent_off_fail(tmp_path, eval_set):
    table = checked(tmp_path, eval_set, weights=[W[0], W[1] * np.float32(1.01)])
    # the error is 1 % of x @ W2 (the bias unchanged): worked out with numpy
    assert table.loc["y2", "max_abs_error"] == pytest.approx(
        np.abs(0.01 * (X @ W[1])).max(), rel=1e-3)
    assert table["passed"].tolist() == [True, False]


def test_swapped_outputs_fail(tmp_path, eval_set):
    table = checked(tmp_path, eval_set, names=("y2", "y1"))
    swapped = np.abs((X @ W[0] + B[0]) - (X @ W[1] + B[1])).max()
    assert table["max_abs_error"].tolist() == pytest.approx([swapped, swapped], rel=1e-5)
    assert not table["passed"].any()


@pytest.fixture
def served(monkeypatch):
    """accuracy() with the server's outputs (infer_all's) set by the test: every part of
    serving replaced, the comparison and its limits the step's own."""
    sent = {}

    @contextlib.contextmanager
    def fake_served(spec, config_pbtxt, log):
        yield SimpleNamespace(grpc_url="", pids=[], version="", metrics=lambda: "",
                              served_name=lambda n: n), {"device": "cpu"}

    @contextlib.contextmanager
    def quiet(*args, **kwargs):
        yield SimpleNamespace(result={})

    metric = SimpleNamespace(evaluate=lambda hp, outputs, targets: {
        "mean_y1": float(np.mean(outputs[0]))})
    monkeypatch.setattr(accuracy_step.serving, "served", fake_served)
    monkeypatch.setattr(accuracy_step.artifacts, "cache_report", lambda metrics: {})
    monkeypatch.setattr(accuracy_step.record, "archive", lambda *a: None)
    monkeypatch.setattr(accuracy_step, "Telemetry", quiet)
    monkeypatch.setattr(accuracy_step.plugins, "load", lambda name: metric)
    monkeypatch.setattr(accuracy_step.source_model, "refusal", lambda m: None)
    deployment = SimpleNamespace(name="toy", max_batch_size=8)
    monkeypatch.setattr(accuracy_step.deployments, "for_scenario",
                        lambda *a: sent.setdefault("for_scenario", a) and deployment)
    monkeypatch.setattr(accuracy_step.deployments, "describe", lambda d: {"model": d.name})
    monkeypatch.setattr(accuracy_step.triton_config, "served_inputs", lambda p: ["x"])

    def infer_all(url, spec, inputs, batch, served_inputs, name, encoder, version):
        sent["infer_all"] = (batch, served_inputs, name, encoder, [a.shape for a in inputs])
        return sent["outputs"]

    monkeypatch.setattr(accuracy_step, "infer_all", infer_all)
    return sent


def accuracy_of(tmp_path, eval_set, served, outputs) -> pd.DataFrame:
    served["outputs"] = outputs
    accuracy_step.accuracy(RUN, tmp_path / "repo", eval_set, tmp_path / "accuracy.csv",
                           tmp_path / "accuracy.json", tmp_path / "server.log")
    return pd.read_csv(tmp_path / "accuracy.csv").set_index("name")


def test_accuracy_on_triton_fails_a_wrong_model_by_its_known_deviation(tmp_path, eval_set,
                                                                      served):
    right = [X @ w + b for w, b in zip(W, B)]
    table = accuracy_of(tmp_path, eval_set, served, right)
    assert table.loc["max_abs_deviation:y1", "triton"] < 1e-6
    assert table.loc["mean_y1", "triton"] == table.loc["mean_y1", "source"]
    require_accurate(tmp_path / "accuracy.csv")
    off = [right[0] + np.float32(0.01), right[1]]
    table = accuracy_of(tmp_path, eval_set, served, off)
    assert table.loc["max_abs_deviation:y1", "triton"] == pytest.approx(0.01, abs=1e-6)
    passed = table.loc[["max_abs_deviation:y1", "max_abs_deviation:y2"], "passed"]
    assert passed.astype(str).tolist() == ["False", "True"]
    # the metric of the served outputs beside the source model's: 0.01 apart
    assert table.loc["mean_y1", "triton"] - table.loc["mean_y1", "source"] == pytest.approx(
        0.01, abs=1e-6)
    with pytest.raises(ValueError, match=r"max_abs_deviation:y1 = 0.01 > 0.0001"):
        require_accurate(tmp_path / "accuracy.csv")
    swapped = accuracy_of(tmp_path, eval_set, served, right[::-1])
    passed = swapped.loc[["max_abs_deviation:y1", "max_abs_deviation:y2"], "passed"]
    assert passed.astype(str).tolist() == ["False", "False"]


def test_accuracy_asks_the_server_for_every_sample_and_writes_what_it_compared(
        tmp_path, eval_set, served):
    """The 20 samples sent in batches of accuracy.batch_size to the deployment that covers
    it, as the served inputs; accuracy.json says how many samples, of which split, on which
    deployment."""
    import json

    accuracy_of(tmp_path, eval_set, served, [X @ w + b for w, b in zip(W, B)])
    assert served["for_scenario"][1:] == ("accuracy", 8)
    assert served["infer_all"] == (8, ["x"], "toy", None, [(20, 4)])
    report = json.loads((tmp_path / "accuracy.json").read_text())
    assert (report["samples"], report["split"], report["deployment"]) == (20, "test",
                                                                         {"model": "toy"})
    assert report["provenance"] == {"device": "cpu"}


def test_an_integer_output_is_also_judged_by_its_share_of_exact_samples(tmp_path, served,
                                                                       monkeypatch):
    """An INT64 output (lengths, ids): 3 of 20 samples one off give a deviation of 1 (over
    its 0.5 limit for that output) and an agreement of 17 / 20 = 0.85; the FP32 output, its
    limit raised to 0.05 for it alone, passes 0.01 off."""
    model = {**MODEL, "outputs": [MODEL["outputs"][0],
                                  {"name": "n", "dtype": "INT64", "dims": [1]}],
             "accuracy": {"batch_size": 8, "max_abs_deviation": {
                 "fp32": 1.0e-4, "outputs": {"n": {"fp32": 0.5}, "y1": {"fp32": 0.05}}}}}
    monkeypatch.setitem(RUN, "model", model)
    lengths = np.arange(20, dtype=np.int64).reshape(20, 1)
    path = tmp_path / "eval.npz"
    source_model.save_eval(model, [X], [X @ W[0] + B[0], lengths], [np.zeros(20)], path)
    served_lengths = lengths.copy()
    served_lengths[[2, 7, 11]] += 1
    table = accuracy_of(tmp_path, path, served, [X @ W[0] + B[0] + np.float32(0.01),
                                                  served_lengths])
    assert table.loc["agreement:n", "triton"] == 0.85
    assert table.loc["max_abs_deviation:n", "triton"] == 1.0
    assert table.loc[["max_abs_deviation:y1", "max_abs_deviation:n"], "passed"].astype(
        str).tolist() == ["True", "False"]
    assert table.loc["max_abs_deviation:y1", "limit"] == 0.05
