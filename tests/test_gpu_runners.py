"""The torch runners on a GPU (skipped without one): the packed upload, device tensors in
and out, a CUDA graph's outputs not overwritten by the next replay, and the PyTorch 2
runners (AOTInductor, torch.compile with CUDA graphs) in FP16 against the source model."""

import numpy as np
import pytest
import torch
import yaml

from conftest import ROOT
from deploybench import runners
from deploybench.models import tft

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

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


@pytest.mark.parametrize("name", ["aoti", "torch-compile"])
def test_pytorch2_runners_in_fp16(tiny, name):
    work, inputs, reference = tiny
    opts = options("fp16", compile_mode="reduce-overhead")
    artifact = work / "m.pt2"
    if name == "aoti":
        artifact = work / "aoti.pt2"
        assert runners.convert(name, work / "m.pt2", artifact, opts)
    runner = runners.load(name, artifact, opts)
    for batch in (8, 3):  # a bucket, and a padded one
        got = runner([a[:batch] for a in inputs])[0]
        np.testing.assert_allclose(got, reference[:batch], atol=5e-2, rtol=5e-2)
        device = runner.run_tensors(runner.upload([a[:batch] for a in inputs]))[0]
        np.testing.assert_allclose(device.cpu().numpy(), got, atol=1e-6)
