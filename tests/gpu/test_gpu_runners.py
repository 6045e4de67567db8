"""The torch runners on a GPU (skipped without one): the packed upload, device tensors in
and out, a CUDA graph's outputs not overwritten by the next replay, and the PyTorch 2
runners (AOTInductor, torch.compile with CUDA graphs) in FP16 against the source model.
NVML telemetry of a real matmul loop, and another process on the GPU as host load."""

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
import yaml

from deploybench import runners
from deploybench.measurement import nvml, telemetry
from deploybench.measurement.device import measured_device
from deploybench.measurement.host_load import HostLoad
from deploybench.models import tft
from deploybench.records.tables import ENERGY_PER_INFERENCE
from testkit.workflow import ROOT

CONFIG = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny TFT, its evaluation batch, its outputs, and its exports."""
    work = tmp_path_factory.mktemp("gpu")
    hparams = CONFIG["hparams"]
    model = tft.build_model(hparams, None, 0)
    tft.generate_dataset(hparams, str(work / "data"), **CONFIG["data"]["generate"])
    inputs, _ = tft.load_split(hparams, str(work / "data"), "test", 8)
    example = tuple(torch.from_numpy(a) for a in inputs)
    with torch.no_grad():
        reference = model(*example).numpy()
        torch.jit.save(torch.jit.trace(model, tuple(t[:2] for t in example)), work / "m.pt")
    batch = torch.export.Dim("batch", min=1, max=1024)
    program = torch.export.export(model, tuple(t[:2] for t in example),
                                  dynamic_shapes=tuple({0: batch} for _ in example))
    torch.export.save(program, work / "m.pt2")
    return work, inputs, reference


def options(precision="fp32", **extra):
    names = tuple(t["name"] for t in CONFIG["inputs"])
    return runners.Options(inputs=names, outputs=("target__0",), precision=precision,
                           device_id=0, max_batch_size=8, **extra)


def test_a_packed_upload_equals_one_copy_per_input(tiny):
    work, inputs, reference = tiny
    runner = runners.load("torch", work / "m.pt", options())
    packed = runner.upload(inputs)  # 8 small arrays of two dtypes: one copy
    assert all(p.device.type == "cuda" for p in packed)
    for p, a in zip(packed, inputs):
        assert p.dtype == torch.from_numpy(a).dtype and p.shape == a.shape
        np.testing.assert_array_equal(p.cpu().numpy(), a)
    np.testing.assert_allclose(runner(inputs)[0], reference, atol=1e-4)


def test_device_tensors_in_and_out_and_graph_outputs_kept(tiny):
    work, inputs, reference = tiny
    runner = runners.load("torch-cudagraph", work / "m.pt", options())
    first = runner.run_tensors(runner.upload(inputs))[0]
    assert first.device.type == "cuda" and first.dtype == torch.float32
    other = [a[::-1].copy() for a in inputs]
    runner.run_tensors(runner.upload(other))  # replays the same graph
    np.testing.assert_allclose(first.cpu().numpy(), reference, atol=1e-4)  # not overwritten


@pytest.mark.parametrize("name", ["aoti", "aoti-cudagraph", "torch-compile"])
def test_pytorch2_runners_in_fp16(tiny, name):
    work, inputs, reference = tiny
    opts = options("fp16", compile_mode="reduce-overhead")
    artifact = work / "m.pt2"
    if name.startswith("aoti"):
        artifact = work / f"{name}.pt2"
        assert runners.convert(name, work / "m.pt2", artifact, opts)
    runner = runners.load(name, artifact, opts)
    for batch in (8, 3):  # a bucket, and a padded one
        got = runner([a[:batch] for a in inputs])[0]
        np.testing.assert_allclose(got, reference[:batch], atol=5e-2, rtol=5e-2)
        device = runner.run_tensors(runner.upload([a[:batch] for a in inputs]))[0]
        np.testing.assert_allclose(device.cpu().numpy(), got, atol=1e-6)
    if runner.aliased:  # a replay's outputs are copies: the next replay leaves them be
        other = [a[:batch][::-1].copy() for a in inputs]  # the same graph, other inputs
        runner.run_tensors(runner.upload(other))
        np.testing.assert_allclose(device.cpu().numpy(), got, atol=1e-6)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_onnx_runtime_takes_and_gives_device_tensors(tiny, precision):
    """ONNX Runtime's CUDA provider with I/O binding (what the native step times on the
    device and the ensemble's lookups feed): equal to its host-array call."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs onnxruntime-gpu")
    work, inputs, reference = tiny
    model = tft.build_model(CONFIG["hparams"], None, 0)
    example = tuple(torch.from_numpy(a[:2]) for a in inputs)
    names = [t["name"] for t in CONFIG["inputs"]]
    torch.onnx.export(model, example, str(work / "m.onnx"), input_names=names,
                      output_names=["target__0"], dynamo=False,
                      dynamic_axes={n: {0: "batch"} for n in [*names, "target__0"]})
    opts = options(precision, output_dims=(tuple(CONFIG["outputs"][0]["dims"]),))
    artifact = work / f"m-{precision}.onnx"
    if not runners.convert("onnxruntime", work / "m.onnx", artifact, opts):
        artifact = work / "m.onnx"
    runner = runners.load("onnxruntime", artifact, opts)
    host = runner(inputs)[0]
    np.testing.assert_allclose(host, reference, atol=5e-2 if precision == "fp16" else 1e-4)
    device = runner.run_tensors(runner.to_device([torch.from_numpy(a) for a in inputs]))[0]
    assert device.device.type == "cuda" and device.dtype == torch.float32
    np.testing.assert_allclose(device.cpu().numpy(), host, atol=1e-6)


class Two(torch.nn.Module):
    """y = tanh(x W + b) * (i + 1), s = sum(x): two inputs of two dtypes, two outputs."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, i):
        return torch.tanh(self.linear(x)) * (i.float() + 1), x.sum(1, keepdim=True)


def test_onnx_runtimes_cuda_graphs_equal_its_plain_runs(tmp_path, capfd):
    """`cuda_graphs` (the largest batch to capture, as the C++ engine takes it): ONNX Runtime
    on the runner's own stream, a graph per bucket (1, 2, 4, 8) captured and timed against a
    plain run, kept where it pays. Batches on and between the buckets equal the runner without
    graphs, and an output handed out is not overwritten by the next replay."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs onnxruntime-gpu")
    example = (torch.randn(2, 4), torch.ones(2, 1, dtype=torch.int64))
    torch.onnx.export(Two(), example, str(tmp_path / "two.onnx"), input_names=["x", "i"],
                      output_names=["y", "s"], dynamo=False,
                      dynamic_axes={n: {0: "batch"} for n in ("x", "i", "y", "s")})
    opts = runners.Options(inputs=("x", "i"), outputs=("y", "s"), device_id=0,
                           max_batch_size=8, output_dims=((3,), (1,)))
    plain = runners.load("onnxruntime", tmp_path / "two.onnx", opts)
    graphs = runners.load("onnxruntime", tmp_path / "two.onnx", replace(opts, cuda_graphs=8))
    assert graphs.graphs is not None and plain.graphs is None
    rng = np.random.default_rng(3)
    first = None
    for n in (1, 3, 5, 8, 2, 8):
        feed = [torch.from_numpy(rng.standard_normal((n, 4)).astype(np.float32)).cuda(),
                torch.from_numpy(rng.integers(0, 5, (n, 1))).cuda()]
        got, want = graphs.run_tensors(feed), plain.run_tensors(feed)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == torch.float32
            torch.testing.assert_close(g, w, rtol=0, atol=1e-6)
        if first is None:
            first, first_want = got, [w.clone() for w in want]
    for g, w in zip(first, first_want):  # five replays later, still its own rows
        torch.testing.assert_close(g, w, rtol=0, atol=1e-6)
    err = capfd.readouterr().err
    assert "CUDA graphs refused" not in err, err
    timed = re.findall(r"CUDA graph at batch bucket (\d+) \(batch (\d+)\): replay ([\d.]+) ms, "
                       r"plain run ([\d.]+) ms: (kept|not kept)", err)
    assert [(int(b), int(n)) for b, n, *_ in timed] == [(1, 1), (4, 3), (8, 5), (2, 2)], err
    assert all((kind == "kept") == (float(r) < float(p)) for *_, r, p, kind in timed)
    assert all(kind == "kept" for *_, kind in timed), err  # this small a graph: launch-bound


def _matmuls(a: torch.Tensor, seconds: float) -> None:
    """Back-to-back matmuls for about `seconds`, the GPU never idle: each chunk is queued
    before waiting for the one before, and the last is left queued."""
    end, previous = time.monotonic() + seconds, None
    while time.monotonic() < end:
        for _ in range(20):
            a @ a
        queued = torch.cuda.Event()
        queued.record()
        if previous is not None:
            previous.synchronize()
        previous = queued


def test_nvml_telemetry_sees_a_matmul_loop():
    """Utilisation, power, clocks and memory while the GPU multiplies, and the energy
    counter agreeing with the power samples: the GPU is kept busy from before the sampler
    starts until it stops (power readings average over up to a second)."""
    device = measured_device({"devices": ["gpu"]})  # the pipeline's own choice, a UUID
    a = torch.randn(8192, 8192, device="cuda")
    _matmuls(a, 2.0)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    _matmuls(a, 1.0)  # queued: busy while the sampler opens NVML
    with telemetry.Telemetry(device) as usage:
        grown = torch.empty(2**30 // 4, device="cuda")  # 1 GiB more, held to the end
        grown.fill_(1.0)
        _matmuls(a, 4.0)
        torch.cuda.synchronize()
    gpu = usage.result["gpu"]
    assert isinstance(gpu, dict), gpu  # NVML worked
    seconds = usage.result["duration_s"]
    assert gpu["samples"] >= seconds / usage.result["interval_s"] * 0.5, gpu
    assert 50 < gpu["utilization_percent"]["max"] <= 100, gpu
    assert 0 < gpu["utilization_percent"]["mean"] <= gpu["utilization_percent"]["max"]
    assert 0 < gpu["power_w"]["mean"] <= gpu["power_w"]["max"], gpu
    assert 0 < gpu["sm_clock_mhz"]["min"] <= gpu["sm_clock_mhz"]["mean"], gpu
    memory = gpu["memory_used_mib"]
    assert memory["max"] - memory["min"] >= 0.9 * 1024, memory  # the 1 GiB allocated
    assert isinstance(gpu["clock_event_reasons"], list), gpu
    # the GPU's energy counter (Volta and newer) against mean power x duration
    assert gpu["energy_source"] == "energy counter", gpu
    assert gpu["energy_j"] == pytest.approx(gpu["power_w"]["mean"] * seconds, rel=0.15), (
        gpu, seconds)
    row = telemetry.columns(usage.result, throughput=1000.0)
    assert row[ENERGY_PER_INFERENCE] == pytest.approx(gpu["power_w"]["mean"], rel=1e-6)
    del grown


NEIGHBOUR = ("import os, sys, time, torch\n"
             "x = torch.ones(2**26, device='cuda')\n"
             "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
             "time.sleep(60)")


def test_another_process_on_the_gpu_is_contention(tmp_path):
    """A process outside the step's tree holding a CUDA context on the measured GPU is
    listed by name and flags the measurement; this process's own context is not."""
    device = measured_device({"devices": ["gpu"]})
    torch.zeros(1, device="cuda")  # this process is on the GPU too
    with nvml.Gpu(device) as gpu:
        if os.getpid() not in {p["pid"] for p in gpu.processes()}:
            pytest.skip("NVML lists another PID namespace's pids here (a container)")
    marker = tmp_path / "pid"
    # sh starts it in the background and exits: the neighbour is nobody's child here
    subprocess.run(["sh", "-c", f"{sys.executable} -c \"$0\" {marker} &", NEIGHBOUR],
                   check=True)
    deadline = time.monotonic() + 120
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "the neighbour never got the GPU"
        time.sleep(0.2)
    pid = int(marker.read_text())
    try:
        with HostLoad(device) as load:
            time.sleep(0.5)
    finally:
        os.kill(pid, signal.SIGTERM)
    others = load.result["other_gpu_processes"]
    assert isinstance(others, list), others
    listed = {p["pid"]: p for p in others}
    assert pid in listed and listed[pid]["seen"] and "python" in listed[pid]["name"], others
    assert os.getpid() not in listed and load.result["contended"], load.result
