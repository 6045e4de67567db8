"""BERT exported in FP16 from the pipeline's source steps: an FP16 graph close to the FP32
source, a trace that runs in half on the CPU, and refused where a format has no FP16."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

NAMES = ["input__0", "input__1", "input__2"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """bert-tiny's weights and evaluation set, as the pipeline's source steps make them."""
    from deploybench.settings.resolve import Settings
    from deploybench.steps import source as steps
    from testkit.workflow import main_config

    settings = Settings(main_config())
    spec = settings.export_settings("bert-tiny")
    out = tmp_path_factory.mktemp("bert-tiny")
    steps.weights(spec, out / "weights.pt")
    steps.generate_data(spec, out / "data")
    steps.eval_set(spec, out / "weights.pt", out / "data", out / "eval.npz")
    return settings, out


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
def test_fp16_export_is_an_fp16_graph_close_to_the_fp32_source(source):
    """The export step's onnx-fp16 (the reference's EXPORT_PRECISION fp16): every weight and
    both outputs FP16 in the graph, ids still INT32; on ONNX Runtime's CPU provider its
    logits match the FP32 source model's within the FP16 conversion tolerance; the convert
    step serves it as it is (no second cast)."""
    from deploybench import single
    from deploybench.records import layout
    from deploybench.source import model as source_model
    from deploybench.steps.conversion_check import compare, tolerance
    from deploybench.steps.export import export

    settings, out = source
    run = settings.run("bert-tiny", "h100", "onnx", "fp16")
    spec = {**settings.export_settings("bert-tiny"), "export": {"onnx_opset": 13}}
    exported = out / "onnx-fp16.onnx"
    export(spec, layout.export_folder("onnx", "fp16"), out / "weights.pt", out / "eval.npz",
           exported)
    graph = onnx.load(str(exported)).graph
    elem = onnx.TensorProto
    assert {i.data_type for i in graph.initializer if i.data_type in (elem.FLOAT,
                                                                      elem.FLOAT16)} == {
        elem.FLOAT16}
    assert [o.type.tensor_type.elem_type for o in graph.output] == [elem.FLOAT16] * 2
    assert [i.type.tensor_type.elem_type for i in graph.input] == [elem.INT32] * 3

    inputs, reference, _ = source_model.load_eval(spec, out / "eval.npz")
    session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip(NAMES, inputs)))
    assert all(g.dtype == np.float16 for g in got)
    for tensor, g, ref in zip(spec["outputs"], got, reference):
        tol = tolerance(run["model"], "fp16", tensor["name"])
        row = compare(tensor["name"], g, ref, tol["atol"], tol["rtol"])
        assert row["passed"], row
        assert row["max_abs_error"] > 0  # it did run in FP16

    converted = out / "converted.onnx"
    single.convert(run, exported, converted)
    assert converted.read_bytes() == exported.read_bytes()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fp16_trace_runs_in_half_on_the_cpu(source):
    """ts-trace-fp16: torch on the CPU traces the halved model (DLE's reference traced it in
    FP16 too); the trace's logits are FP16 and match the source's."""
    from deploybench.source import model as source_model
    from deploybench.steps.export import export

    settings, out = source
    spec = settings.export_settings("bert-tiny")
    export(spec, "ts-trace-fp16", out / "weights.pt", out / "eval.npz", out / "trace.pt")
    inputs, reference, _ = source_model.load_eval(spec, out / "eval.npz")
    with torch.no_grad():
        got = torch.jit.load(str(out / "trace.pt"))(*(torch.from_numpy(a) for a in inputs))
    for g, ref in zip(got, reference):
        assert g.dtype == torch.float16
        np.testing.assert_allclose(g.float().numpy(), ref, rtol=0, atol=5e-2)


def test_fp16_export_is_refused_where_the_format_has_none(source):
    from deploybench.steps.export import export

    settings, out = source
    with pytest.raises(ValueError, match="exports 'torch-export' in FP32 only"):
        export(settings.export_settings("bert-tiny"), "torch-export-fp16", out / "weights.pt",
               out / "eval.npz", out / "program.pt2")
