"""The C++ backend's unit tests (triton_backend/tests/*_test.cc, one program built by its
CMake beside the library): Triton's data types as ATen's, gather and scatter of every data type
over a fake of the server's API (the batch's statistics too), ONNX Runtime's engine over an
identity graph of each type the pipeline serves (FP32, FP16, INT32, INT64, BOOL: an INT32
input bound as INT64 fails in seconds), requests of a wrong type or shape failing alone, the
embedding store against a plain gather with a cache a tenth of its tables, its refresh, its
metrics and the .npy reader's refusals, a trace's convolutions made strict FP32; and the
python runner's strictness beside it. It starts no server: not e2e."""

import os
import subprocess

import torch

from deploybench.triton import cpp_backend, install


class Nested(torch.nn.Module):
    """A convolution of its own and one of a submodule."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Conv1d(4, 4, 3, padding=1)
        self.inner = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Conv1d(4, 2, 1))

    def forward(self, x):
        return self.inner(self.first(x))


def trace_allowing_tf32(path):
    """Nested traced as torch traces by default, TF32 allowed (whatever an earlier test of
    this process set), saved to `path`."""
    allowed = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        trace = torch.jit.trace(Nested().eval(), torch.randn(2, 4, 16))
    finally:
        torch.backends.cudnn.allow_tf32 = allowed
    trace.save(str(path))
    return trace


def identity_graphs(folder) -> None:
    """identity_<TYPE>.onnx: y = x, x of [batch, 3], for each type the pipeline serves and
    the C++ unit tests run through ONNX Runtime's engine."""
    from onnx import TensorProto, helper, save

    folder.mkdir()
    for name in ("FP32", "FP16", "INT32", "INT64", "BOOL"):
        kind = getattr(TensorProto, {"FP32": "FLOAT", "FP16": "FLOAT16"}.get(name, name))
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])], "identity",
            [helper.make_tensor_value_info("x", kind, ["n", 3])],
            [helper.make_tensor_value_info("y", kind, ["n", 3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        save(model, folder / f"identity_{name}.onnx")


def test_the_backends_unit_tests_pass(tmp_path):
    program = cpp_backend.unit_tests(install.cache_dir())
    torch.manual_seed(0)
    trace_allowing_tf32(tmp_path / "trace.pt")
    identity_graphs(tmp_path / "onnx")
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, DEPLOYBENCH_TEST_TRACE=str(tmp_path / "trace.pt"),
                                     DEPLOYBENCH_TEST_ONNX_DIR=str(tmp_path / "onnx")))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "passed: 0 failure(s)", result.stdout


def _allowing_tf32(module) -> int:
    return sum(bool(node.inputsAt(12).toIValue()) for part in module.modules()
               for name in part._c._method_names()
               for node in part._c._get_method(name).graph.findAllNodes("aten::_convolution"))


def test_the_python_runner_makes_an_fp32_traces_convolutions_strict_too(tmp_path):
    """The python backend's TorchScript runner does as the C++ engine: an FP32 trace's
    convolutions may not use TF32 once loaded (an FP16 model's keep what they had)."""
    from deploybench import runners

    trace = trace_allowing_tf32(tmp_path / "trace.pt")
    assert _allowing_tf32(trace) == 2
    for precision, allowing in (("fp32", 0), ("fp16", 2)):
        runner = runners.load("torch", tmp_path / "trace.pt",
                              runners.Options(inputs=("x",), precision=precision))
        assert _allowing_tf32(runner.model) == allowing, precision
