"""The TFT plug-in: data format round trip, exports that reproduce the model, metric,
checkpoints."""

import pickle

import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml

from conftest import ROOT
from deploybench.models import tft, tft_data
from deploybench.tensors import check_arrays

TINY = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
HP = TINY["hparams"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("tft_data")
    tft.generate_dataset(HP, str(out), seed=3, n_ids=4, n_timesteps=30)
    return out


def test_generated_files_have_the_binary_layout(data):
    with open(data / "test.bin", "rb") as f:
        groups = pickle.load(f)
    assert len(groups) == 4 and groups[0].dtype == np.int32 and groups[0].shape == (30, 7)
    values = groups[2].view(np.float32)
    assert (values[:, tft_data.ID] == 2).all() and (values[:, tft_data.STATIC] == 2).all()
    assert values[:, tft_data.TIME].tolist() == list(range(60, 90))  # test follows valid


def test_loader_cuts_windows_with_dummies_for_absent_groups(data):
    inputs, targets = tft.load_split(HP, str(data), "test", max_samples=None)
    check_arrays(TINY["inputs"], inputs, "tiny")  # names, dtypes, dims of the config
    assert len(inputs[0]) == 4 * (30 - 24 + 1)  # stride 1
    np.testing.assert_array_equal(targets[0], inputs[6][:, 16:, :])
    assert not inputs[1].any() and not inputs[2].any()  # dummies
    with pytest.raises(FileNotFoundError, match="nope/test.bin"):
        tft.load_split(HP, str(data / "nope"), "test", None)


def test_exports_reproduce_the_model(data, tmp_path):
    inputs, _ = tft.load_split(HP, str(data), "test", max_samples=8)
    model = tft.build_model(HP, None, seed=0)
    x = tuple(torch.from_numpy(a) for a in inputs)
    with torch.no_grad():
        expected = model(*x).numpy()
        assert expected.shape == (8, 8, 3)
        for scripted in (torch.jit.trace(model, x), torch.jit.script(model)):
            np.testing.assert_allclose(scripted(*x).numpy(), expected, atol=1e-5)
        names = [t["name"] for t in TINY["inputs"]]
        torch.onnx.export(model, x, str(tmp_path / "m.onnx"), input_names=names,
                          output_names=["target__0"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "b"} for n in [*names, "target__0"]})
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    have = {i.name for i in session.get_inputs()}
    (got,) = session.run(None, {n: a for n, a in zip(names, inputs) if n in have})
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_quantile_risk():
    tgt = np.random.default_rng(0).normal(size=(5, 8, 1)).astype(np.float32)
    perfect = np.repeat(tgt, 3, axis=2)
    assert tft.evaluate(HP, [perfect], [tgt]) == {"p10_risk": 0.0, "p50_risk": 0.0,
                                                  "p90_risk": 0.0}
    # P50 risk of a zero forecast: 2 * sum(0.5 |y|) / sum |y| = 1
    assert tft.evaluate(HP, [np.zeros_like(perfect)], [tgt])["p50_risk"] == pytest.approx(1.0)


def test_seeded_weights_and_dle_checkpoints(tmp_path):
    a, b = tft.build_model(HP, None, 7), tft.build_model(HP, None, 7)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values()))
    # The DeepLearningExamples layout: <dir>/checkpoint.pt = {'model': state_dict, ...}
    torch.save({"model": a.model.state_dict(), "epoch": 3}, tmp_path / "checkpoint.pt")
    loaded = tft.build_model(HP, str(tmp_path), seed=99)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 loaded.state_dict().values()))
    with pytest.raises(FileNotFoundError, match="missing/checkpoint.pt"):
        tft.build_model(HP, str(tmp_path / "missing" / "checkpoint.pt"), 0)
    wider = dict(HP, hidden_size=32)
    with pytest.raises(ValueError, match="does not match the configured hparams"):
        tft.build_model(wider, str(tmp_path), 0)


def test_reference_configs_match_the_model():
    """The tensors of config/models/tft*.yaml are what the reference-size model takes."""
    for key in ("tft", "tft-traffic"):
        config = yaml.safe_load((ROOT / f"config/models/{key}.yaml").read_text())
        model = tft.build_model(config["hparams"], None, 0)
        x = [torch.zeros([2, *t["dims"]], dtype=torch.int64 if t["dtype"] == "INT64"
                         else torch.float32) for t in config["inputs"]]
        with torch.no_grad():
            assert list(model(*x).shape[1:]) == config["outputs"][0]["dims"]
