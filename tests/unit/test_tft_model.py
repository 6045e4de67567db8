"""The TFT plug-in: DLE's binary data format (generator and loader), the network and its
exports (TorchScript trace and script, ONNX), the q-risk metric and DLE checkpoints."""

import argparse
import collections
import enum
import pickle
import sys
import types

import numpy as np
import onnxruntime as ort
import pytest
import torch

from deploybench.models import tft
from testkit.tft import (
    N_IDS,
    STEPS,
    TINY,
    data,  # noqa: F401 (a fixture)
)
from testkit.workflow import reference_opset

# DLE's ElectricityConfig
ELECTRICITY = {**TINY, "hidden_size": 128, "n_head": 4, "example_length": 192,
               "encoder_length": 168, "static_categorical_inp_lens": [369]}
WINDOWS = STEPS - 24 + 1  # examples per series at stride 1
NAMES = ["s_cat__0", "s_cont__1", "k_cat__2", "k_cont__3", "o_cat__4", "o_cont__5",
         "target__6", "id__7"]


def read_bin(path):
    with open(path, "rb") as f:
        return [series.view(np.float32) for series in pickle.load(f)]


def test_generated_files_have_dle_binary_layout(data, tmp_path):
    assert sorted(p.name for p in data.iterdir()) == ["test.bin", "train.bin", "valid.bin"]
    with open(data / "test.bin", "rb") as f:
        raw = pickle.load(f)
    assert len(raw) == N_IDS and all(s.dtype == np.int32 and s.shape == (STEPS, 7) for s in raw)
    train, valid = read_bin(data / "train.bin"), read_bin(data / "valid.bin")
    for code, series in enumerate(train):
        # columns: id, hours_from_start (TIME), target, hour, day_of_week, hours_from_start, id
        assert (series[:, 0] == code).all() and (series[:, 6] == code).all()
        np.testing.assert_array_equal(series[:, 1], series[:, 5])
        # standardised per series on the train split, as DLE's scale_per_id does
        np.testing.assert_allclose(series[:, [2, 3, 4, 5]].mean(0), 0, atol=1e-5)
        np.testing.assert_allclose(series[:, [2, 3, 4, 5]].std(0), 1, atol=1e-5)
        np.testing.assert_array_equal(series[24:, 3], series[:-24, 3])  # hour: daily cycle
        assert (np.diff(series[:, 5]) > 0).all()
        # valid starts encoder_length steps before train ends
        np.testing.assert_array_equal(valid[code][:16], series[-16:])
    # seeded: the same bytes again, other bytes for another seed
    tft.generate_dataset(TINY, str(tmp_path / "a"), seed=3, n_ids=N_IDS, n_timesteps=STEPS)
    tft.generate_dataset(TINY, str(tmp_path / "b"), seed=4, n_ids=N_IDS, n_timesteps=STEPS)
    assert (tmp_path / "a/test.bin").read_bytes() == (data / "test.bin").read_bytes()
    assert (tmp_path / "b/test.bin").read_bytes() != (data / "test.bin").read_bytes()


def test_load_split_gives_triton_inputs_and_targets(data):
    inputs, targets = tft.load_split(TINY, str(data), "test", max_samples=None)
    n = N_IDS * WINDOWS
    shapes = [(n, 24, 1), (n, 1), (n, 1), (n, 24, 3), (n, 1), (n, 1), (n, 24, 1), (n, 24, 1)]
    dtypes = [np.int64, np.float32, np.int64, np.float32, np.int64, np.float32, np.float32,
              np.int64]
    assert [a.shape for a in inputs] == shapes
    assert [a.dtype for a in inputs] == dtypes
    for dummy in (1, 2, 4, 5):  # absent groups: ones, as DLE's triton dataloader sends them
        assert (inputs[dummy] == 1).all()
    assert len(targets) == 1 and targets[0].dtype == np.float32
    np.testing.assert_array_equal(targets[0], inputs[6][:, 16:, :])
    # max_samples keeps DLE's index order: the first examples
    first, _ = tft.load_split(TINY, str(data), "test", max_samples=20)
    assert all(np.array_equal(a, b[:20]) for a, b in zip(first, inputs))


def test_loader_returns_the_generated_series(data):
    raw = read_bin(data / "valid.bin")
    inputs, _ = tft.load_split(TINY, str(data), "valid", None)
    for code in range(N_IDS):
        for start in (0, 5, WINDOWS - 1):
            i = code * WINDOWS + start
            rows = raw[code][start : start + 24]
            assert (inputs[0][i] == code).all() and (inputs[7][i] == code).all()
            np.testing.assert_array_equal(inputs[3][i], rows[:, 3:6])
            np.testing.assert_array_equal(inputs[6][i, :, 0], rows[:, 2])
    # stride: every other start, and DLE's example count (len - length + 1) // stride
    strided, _ = tft.load_split({**TINY, "dataset_stride": 2}, str(data), "valid", None)
    assert len(strided[0]) == N_IDS * (WINDOWS // 2)
    np.testing.assert_array_equal(strided[6][1], inputs[6][2])


def test_loader_reads_a_handmade_dle_file(tmp_path):
    """Known values: target = 100 * series + step; series shorter than an example are
    skipped, as TFTBinaryDataset does."""
    series = []
    for code, length in enumerate([30, 10, 26]):
        table = np.zeros((length, 7), dtype=np.float32)
        table[:, [0, 6]] = code
        table[:, 2] = 100 * code + np.arange(length)
        table[:, 3:6] = np.arange(length)[:, None] * [1, 2, 3]
        series.append(table.view(np.int32))
    with open(tmp_path / "train.bin", "wb") as f:
        pickle.dump(series, f)
    inputs, targets = tft.load_split(TINY, str(tmp_path), "train", None)
    assert len(inputs[0]) == 7 + 3
    np.testing.assert_array_equal(inputs[6][7, :, 0], 200 + np.arange(24))
    np.testing.assert_array_equal(targets[0][9, :, 0], 202 + np.arange(16, 24))
    np.testing.assert_array_equal(inputs[3][3, :, 2], 3 * np.arange(3, 27))
    assert inputs[0][7:].min() == 2
    with pytest.raises(FileNotFoundError, match="nope/test.bin"):
        tft.load_split(TINY, str(tmp_path / "nope"), "test", None)
    with pytest.raises(ValueError, match="unknown split"):
        tft.load_split(TINY, str(tmp_path), "training", None)
    with pytest.raises(ValueError, match="columns"):
        tft.load_split({**TINY, "temporal_known_continuous_inp_size": 2}, str(tmp_path),
                       "train", None)


def test_exports_reproduce_the_model(data, tmp_path):
    inputs, _ = tft.load_split(TINY, str(data), "test", max_samples=12)
    model = tft.build_model(TINY, None, seed=0)
    assert not model.training
    x = tuple(torch.from_numpy(a) for a in inputs)
    example = tuple(t[:2] for t in x)  # exported at batch 2, run at batch 12
    with torch.no_grad():
        expected = model(*x)
        assert expected.shape == (12, 8, 3) and expected.dtype == torch.float32
        assert torch.isfinite(expected).all()
        # the dummies' values do not matter
        other = [t * 7 if i in (1, 2, 4, 5) else t for i, t in enumerate(x)]
        torch.testing.assert_close(model(*other), expected, rtol=0, atol=0)
        for exported in (torch.jit.trace(model, example), torch.jit.script(model)):
            torch.testing.assert_close(exported(*x), expected, rtol=0, atol=1e-4)
        torch.onnx.export(model, example, str(tmp_path / "m.onnx"), input_names=NAMES,
                          output_names=["target__0"], opset_version=reference_opset("tft"),
                          dynamo=False,
                          dynamic_axes={n: {0: "batch"} for n in [*NAMES, "target__0"]})
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    used = {i.name for i in session.get_inputs()}  # the export drops unread inputs
    assert used == {"s_cat__0", "k_cont__3", "target__6"}
    (got,) = session.run(None, {n: a for n, a in zip(NAMES, inputs) if n in used})
    np.testing.assert_allclose(got, expected.numpy(), rtol=0, atol=1e-4)


def test_quantile_risk():
    tgt = np.random.default_rng(0).normal(size=(5, 8, 1)).astype(np.float32)
    perfect = np.repeat(tgt, 3, axis=2)
    assert tft.evaluate(TINY, [perfect], [tgt]) == {"p10_risk": 0.0, "p50_risk": 0.0,
                                                    "p90_risk": 0.0}
    # P50 of a zero forecast: 2 * mean(0.5 |y|) / mean(|y|) = 1
    risks = tft.evaluate(TINY, [np.zeros_like(perfect)], [tgt])
    assert risks["p50_risk"] == pytest.approx(1.0)
    assert all(np.isfinite(v) and v > 0 for v in risks.values())
    # P90 penalises a forecast below the target 9 times as much as one above it
    low = tft.evaluate(TINY, [perfect - 1], [tgt])
    high = tft.evaluate(TINY, [perfect + 1], [tgt])
    assert low["p90_risk"] == pytest.approx(9 * high["p90_risk"])
    with pytest.raises(ValueError, match="quantiles"):
        tft.evaluate(TINY, [perfect[:, :, :2]], [tgt])


def test_evaluate_the_model_on_generated_data(data):
    inputs, targets = tft.load_split(TINY, str(data), "test", max_samples=16)
    with torch.no_grad():
        pred = tft.build_model(TINY, None, 0)(*[torch.from_numpy(a) for a in inputs])
    risks = tft.evaluate(TINY, [pred.numpy()], targets)
    assert set(risks) == {"p10_risk", "p50_risk", "p90_risk"}
    assert all(np.isfinite(v) for v in risks.values())


def test_seeded_build_is_deterministic():
    a, b, c = (tft.build_model(TINY, None, seed) for seed in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values()))
    assert not torch.equal(a.state_dict()["model.quantile_proj.weight"],
                           c.state_dict()["model.quantile_proj.weight"])


def dle_modules():
    """Stand-ins for DLE's `configuration` and `data_utils`, whose classes its train.py
    pickles into checkpoint.pt beside the weights."""
    data_utils = types.ModuleType("data_utils")
    data_utils.InputTypes = enum.IntEnum(
        "InputTypes", ["TARGET", "OBSERVED", "KNOWN", "STATIC", "ID", "TIME"], start=0,
        module="data_utils")
    data_utils.DataTypes = enum.IntEnum(
        "DataTypes", ["CONTINUOUS", "CATEGORICAL", "DATE", "STR"], start=0, module="data_utils")
    data_utils.FeatureSpec = collections.namedtuple(
        "FeatureSpec", ["name", "feature_type", "feature_embed_type"], module="data_utils")
    configuration = types.ModuleType("configuration")
    configuration.ElectricityConfig = type("ElectricityConfig", (), {"__module__": "configuration"})
    return {"data_utils": data_utils, "configuration": configuration}


def save_dle_checkpoint(path, state_dict, hparams, monkeypatch):
    with monkeypatch.context() as patch:
        modules = dle_modules()
        for name, module in modules.items():
            patch.setitem(sys.modules, name, module)
        du = modules["data_utils"]
        config = modules["configuration"].ElectricityConfig()
        config.__dict__.update(hparams)
        config.features = [du.FeatureSpec("id", du.InputTypes.ID, du.DataTypes.CATEGORICAL)]
        args = argparse.Namespace(dataset="electricity", seed=1)
        torch.save({"args": args, "config": config, "model": state_dict}, path)
    assert "configuration" not in sys.modules  # loading must not need DLE's code


def test_dle_checkpoints_load_strictly(tmp_path, monkeypatch):
    source = tft.build_model(TINY, None, seed=5)
    state = source.model.state_dict()  # DLE's TemporalFusionTransformer keys
    save_dle_checkpoint(tmp_path / "checkpoint.pt", state, TINY, monkeypatch)
    with torch.no_grad():
        x = [torch.ones(2, 24, 1, dtype=torch.long), torch.ones(2, 1),
             torch.ones(2, 1, dtype=torch.long), torch.randn(2, 24, 3),
             torch.ones(2, 1, dtype=torch.long), torch.ones(2, 1), torch.randn(2, 24, 1),
             torch.ones(2, 24, 1, dtype=torch.long)]
        expected = source(*x)
        for ckpt in (tmp_path / "checkpoint.pt", tmp_path):  # the file, or its folder
            loaded = tft.build_model(TINY, str(ckpt), seed=99)
            torch.testing.assert_close(loaded(*x), expected, rtol=0, atol=0)
    # Later DLE versions keep the back half in `TFTpart2`; older FP16 (AMP O2) weights
    later = {(k if k.startswith(("embedding.", "static_encoder.")) else f"TFTpart2.{k}"):
             v.half() for k, v in state.items()}
    save_dle_checkpoint(tmp_path / "later.pt", later, TINY, monkeypatch)
    loaded = tft.build_model(TINY, str(tmp_path / "later.pt"), seed=99)
    assert loaded.model.quantile_proj.weight.dtype == torch.float32
    torch.testing.assert_close(loaded.model.quantile_proj.weight, state["quantile_proj.weight"],
                               rtol=0, atol=1e-2)


def test_checkpoint_errors_name_the_path(tmp_path, monkeypatch):
    missing = tmp_path / "missing" / "checkpoint.pt"
    with pytest.raises(FileNotFoundError, match="missing/checkpoint.pt"):
        tft.build_model(TINY, str(missing), 0)
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt"):
        tft.build_model(TINY, str(tmp_path / "junk.pt"), 0)
    state = tft.build_model(TINY, None, 0).model.state_dict()
    save_dle_checkpoint(tmp_path / "checkpoint.pt", state, TINY, monkeypatch)
    # a config the weights cannot show: another encoder length
    with pytest.raises(ValueError, match="encoder_length: checkpoint 16, hparams 12"):
        tft.build_model({**TINY, "encoder_length": 12}, str(tmp_path), 0)
    # weights of another size, no config to tell
    torch.save({"model": state}, tmp_path / "bare.pt")
    with pytest.raises(ValueError, match="bare.pt' does not fit"):
        tft.build_model({**TINY, "hidden_size": 32}, str(tmp_path / "bare.pt"), 0)


def test_reference_electricity_model_runs():
    model = tft.build_model(ELECTRICITY, None, seed=0)
    assert sum(p.numel() for p in model.parameters()) > 100_000
    x = [torch.zeros(2, 192, 1, dtype=torch.long), torch.ones(2, 1),
         torch.ones(2, 1, dtype=torch.long), torch.randn(2, 192, 3),
         torch.ones(2, 1, dtype=torch.long), torch.ones(2, 1), torch.randn(2, 192, 1),
         torch.zeros(2, 192, 1, dtype=torch.long)]
    with torch.no_grad():
        out = model(*x)
    assert out.shape == (2, 24, 3) and torch.isfinite(out).all()
