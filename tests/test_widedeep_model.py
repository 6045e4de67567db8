"""The Wide & Deep (Outbrain) plug-in (TensorFlow 2, Keras 3): seeded initialisation, the
wide + deep composition, the numpy Outbrain layout, DLE's MAP@12, weights files, the
SavedModel export the toolkit makes of it, and both model configs."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import main_config, needs

tf = needs("tensorflow")
keras = needs("keras")

from deploybench import keras_export, runners  # noqa: E402
from deploybench.config import Settings  # noqa: E402
from deploybench.models import widedeep  # noqa: E402
from deploybench.models.widedeep import data as widedeep_data  # noqa: E402
from deploybench.models.widedeep.net import DeepEmbeddings, WideLinear  # noqa: E402

ROOT = Path(__file__).parent.parent
TINY_CONFIG = yaml.safe_load((ROOT / "tests/config/models/widedeep-tiny.yaml").read_text())
FULL_CONFIG = yaml.safe_load((ROOT / "config/models/widedeep.yaml").read_text())
TINY = TINY_CONFIG["hparams"]
CATS = TINY["categorical_features"]
NUMS = TINY["numerical_features"]
SIZES = [min(f["cardinality"], 50) for f in CATS]
INPUTS = TINY_CONFIG["inputs"]
OUTPUTS = TINY_CONFIG["outputs"]


def batch(n=32, seed=0, wild_ids=False):
    rng = np.random.default_rng(seed)
    if wild_ids:  # any INT64 id is valid: the model takes it modulo the table size
        ids = [rng.integers(-2 ** 62, 2 ** 62, (n, 1), dtype=np.int64) for _ in CATS]
    else:
        ids = [rng.integers(0, s, (n, 1)).astype(np.int64) for s in SIZES]
    return ids + [rng.random((n, 1), dtype=np.float32) for _ in NUMS]


def run(model, inputs):
    return np.asarray(model(inputs, training=False))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("outbrain")
    widedeep.generate_dataset(TINY, str(out), seed=3, n_train=40, n_valid=100)
    return out


def test_plugin_declares_tensorflow():
    assert widedeep.FRAMEWORK == "tensorflow"


def test_configs_name_the_features_as_inputs_in_order():
    for config in (TINY_CONFIG, FULL_CONFIG):
        names = [f["name"] for f in config["hparams"]["categorical_features"]]
        names += config["hparams"]["numerical_features"]
        assert [t["name"] for t in config["inputs"]] == names
        assert [t["dtype"] for t in config["inputs"]] == ["INT64"] * 13 + ["FP32"] * 13
        assert all(t["dims"] == [1] for t in config["inputs"])
        assert config["outputs"] == [{"name": "wide_deep_model", "dtype": "FP32", "dims": [1]}]
    # DLE's deep input: 3 x 128 + campaign 128 + 8 x 64 + platform 19 = 1043, + 13 numerical
    dims = [f["embedding_dim"] for f in FULL_CONFIG["hparams"]["categorical_features"]]
    assert sum(dims) == 1043


def test_seeded_init_is_deterministic():
    a, b = widedeep.build_model(TINY, None, 7), widedeep.build_model(TINY, None, 7)
    c = widedeep.build_model(TINY, None, 8)
    wa, wb, wc = a.get_weights(), b.get_weights(), c.get_weights()
    assert len(wa) == len(wb) and all(np.array_equal(x, y) for x, y in zip(wa, wb))
    assert not all(np.array_equal(x, y) for x, y in zip(wa, wc))
    x = batch()
    np.testing.assert_array_equal(run(a, x), run(b, x))
    tables = [np.asarray(t) for t in a.deep_input.tables]
    assert not np.array_equal(tables[0], tables[1])  # distinct seeds per table


def test_output_is_a_probability_per_sample():
    model = widedeep.build_model(TINY, None, 0)
    y = run(model, batch(32))
    assert y.shape == (32, 1) and y.dtype == np.float32
    assert ((y > 0) & (y < 1)).all() and y.std() > 0
    wild = batch(32, wild_ids=True)
    reduced = [np.mod(a, s) for a, s in zip(wild[:13], SIZES)] + wild[13:]
    np.testing.assert_allclose(run(model, wild), run(model, reduced), rtol=1e-6)
    # a numerical input or an id changes the output
    other = wild[:13] + [wild[13] + 1] + wild[14:]
    assert not np.allclose(run(model, wild), run(model, other))
    other = [wild[0] + 1] + wild[1:]
    assert not np.allclose(run(model, wild), run(model, other))
    with pytest.raises(ValueError, match="takes 26 inputs"):
        model(wild[:25])


def test_output_is_sigmoid_of_wide_plus_deep():
    model = widedeep.build_model(TINY, None, 1)
    x = batch(6)
    assert isinstance(model.wide, WideLinear) and isinstance(model.deep_input, DeepEmbeddings)
    wide = np.asarray(model.wide_logit(x))
    deep = np.asarray(model.deep_logit(x))
    assert wide.shape == deep.shape == (6, 1)
    np.testing.assert_allclose(run(model, x), 1 / (1 + np.exp(-(wide + deep))), rtol=1e-5,
                               atol=1e-6)
    # wide part: a per-id weight of each categorical feature, summed, plus a bias
    tables = [np.asarray(t) for t in model.wide.tables]
    expected = sum(t[a[:, 0]] for t, a in zip(tables, x[:13])) + np.asarray(model.wide.bias)
    np.testing.assert_allclose(wide, expected, rtol=1e-5, atol=1e-6)
    # deep part: embeddings (4 wide each) then numerical, through the ReLU MLP
    emb = [np.asarray(t)[a[:, 0]] for t, a in zip(model.deep_input.tables, x[:13])]
    h = np.concatenate(emb + x[13:], axis=1)
    assert h.shape == (6, 13 * 4 + 13)
    for layer in model.deep_mlp:
        h = np.maximum(h @ np.asarray(layer.kernel) + np.asarray(layer.bias), 0)
    out = model.deep_logit_layer
    np.testing.assert_allclose(deep, h @ np.asarray(out.kernel) + np.asarray(out.bias),
                               rtol=1e-4, atol=1e-6)
    assert [layer.units for layer in model.deep_mlp] == [16, 8]


def test_full_size_tables_are_capped():
    from deploybench.models.widedeep.net import table_sizes

    hp = FULL_CONFIG["hparams"]
    assert table_sizes(hp)[:3] == [50000, 50000, 4]
    assert table_sizes({**hp, "max_table_size": None})[:2] == [250000, 300000]


def test_generated_data_has_the_documented_layout(data, tmp_path):
    spec = yaml.safe_load((data / "feature_spec.yaml").read_text())
    assert set(spec) == {"feature_spec", "source_spec", "channel_spec", "metadata"}
    assert spec["channel_spec"]["categorical"] == [f["name"] for f in CATS]
    assert spec["channel_spec"]["numerical"] == NUMS
    assert spec["channel_spec"]["label"] == ["clicked"]
    assert spec["channel_spec"]["display_id"] == ["display_id"]
    assert spec["feature_spec"]["ad_id"] == {"dtype": "int8", "cardinality": 50}
    assert spec["feature_spec"]["platform"] == {"dtype": "int8", "cardinality": 4}
    columns = [f["name"] for f in CATS] + NUMS + ["display_id", "clicked"]
    for split, n in (("train", 40), ("valid", 100)):
        assert sorted(p.name for p in (data / split).iterdir()) == ["part_0.parquet"]
        table = pd.read_parquet(data / split / "part_0.parquet")
        assert list(table.columns) == columns and len(table) == n
        assert table["ad_id"].dtype == np.int8 and table["clicked"].dtype == np.int8
    assert widedeep_data.categorical_dtype(127) == np.int16
    widedeep.generate_dataset(TINY, str(tmp_path / "a"), seed=3, n_train=40, n_valid=100)
    widedeep.generate_dataset(TINY, str(tmp_path / "b"), seed=4, n_train=40, n_valid=100)

    def ctr(root):
        return pd.read_parquet(root / "valid/part_0.parquet")["ad_id_ctr"].to_numpy()

    same = ctr(tmp_path / "a")
    np.testing.assert_array_equal(same, ctr(data))
    assert not np.array_equal(ctr(tmp_path / "b"), same)


def test_load_split_round_trips_what_was_generated(data):
    rng = np.random.default_rng(3)
    widedeep_data.synthesize(rng, 40, SIZES, 13)  # train comes first
    ids, num, display, clicked = widedeep_data.synthesize(rng, 100, SIZES, 13)
    inputs, targets = widedeep.load_split(TINY, str(data), "valid", None)
    assert [a.dtype for a in inputs] == [np.int64] * 13 + [np.float32] * 13
    assert all(a.shape == (100, 1) for a in inputs)
    np.testing.assert_array_equal(np.concatenate(inputs[:13], axis=1), ids)
    np.testing.assert_array_equal(np.concatenate(inputs[13:], axis=1), num)
    label, disp = targets
    assert label.shape == disp.shape == (100, 1)
    assert label.dtype == np.float32 and disp.dtype == np.int64
    np.testing.assert_array_equal(label[:, 0], clicked)
    # validation display ids follow the training ones; one click per display of 2..6 ads
    train_disp = pd.read_parquet(data / "train/part_0.parquet")["display_id"].to_numpy()
    assert disp.min() == train_disp.max() + 1
    _, counts = np.unique(disp, return_counts=True)
    assert counts[:-1].min() >= 2 and counts.max() <= 6
    assert all(label[disp[:, 0] == d].sum() == 1 for d in np.unique(disp))
    first, first_t = widedeep.load_split(TINY, str(data), "valid", 10)
    np.testing.assert_array_equal(first[0], inputs[0][:10])
    np.testing.assert_array_equal(first_t[1], disp[:10])
    with pytest.raises(ValueError, match="no split 'test'"):
        widedeep.load_split(TINY, str(data), "test", None)
    with pytest.raises(FileNotFoundError, match="feature_spec.yaml"):
        widedeep.load_split(TINY, str(data / "valid"), "valid", None)


def test_generated_clicks_are_learnable():
    """The click follows the features: ranking by a logistic fit on the training half
    beats a random ranking's MAP@12 by a clear margin."""
    rng = np.random.default_rng(0)
    ids, num, display, clicked = widedeep_data.synthesize(rng, 20000, SIZES, 13)
    x = np.c_[num, np.ones(len(num))]
    half = len(x) // 2
    w = np.zeros(x.shape[1])
    for _ in range(300):  # gradient descent on the log loss
        p = 1 / (1 + np.exp(-x[:half] @ w))
        w -= 0.5 * x[:half].T @ (p - clicked[:half]) / half
    fitted = widedeep.map_at_k(display[half:], clicked[half:], x[half:] @ w)
    chance = widedeep.map_at_k(display[half:], clicked[half:], rng.random(len(x) - half))
    assert fitted > chance + 0.05


def test_map_at_12_on_hand_made_examples():
    display = np.array([5, 5, 5, 9, 9, 7, 7, 7, 7])
    clicked = np.array([0, 1, 0, 1, 0, 0, 0, 0, 1])
    perfect = clicked * 0.5 + 0.1
    assert widedeep.map_at_k(display, clicked, perfect) == 1.0
    # display 5: clicked ad ranked 2nd (1/2); 9: 1st (1); 7: 4th (1/4)
    scores = np.array([0.9, 0.5, 0.1, 0.8, 0.2, 0.9, 0.8, 0.7, 0.6])
    assert widedeep.map_at_k(display, clicked, scores) == pytest.approx((0.5 + 1 + 0.25) / 3)
    # rank beyond 12: 0; ties: the earlier ad ranks higher; displays without clicks skipped
    d = np.r_[np.zeros(13, int), [1, 1], [2, 2]]
    c = np.r_[np.zeros(12), [1], [0, 1], [0, 0]]
    s = np.r_[np.arange(13, 0, -1), [0.5, 0.5], [0.3, 0.1]]
    assert widedeep.map_at_k(d, c, s) == pytest.approx((0 + 0.5) / 2)
    # shuffled samples: grouped by display id all the same
    order = np.random.default_rng(0).permutation(len(display))
    assert widedeep.map_at_k(display[order], clicked[order], scores[order]) == pytest.approx(
        (0.5 + 1 + 0.25) / 3)
    metrics = widedeep.evaluate(TINY, [scores.reshape(-1, 1).astype(np.float32)],
                                [clicked.reshape(-1, 1).astype(np.float32),
                                 display.reshape(-1, 1)])
    assert metrics == {"map_at_12": pytest.approx((0.5 + 1 + 0.25) / 3)}
    assert math.isnan(widedeep.map_at_k(np.array([1, 1]), np.array([0, 0]), np.array([1, 2])))


def test_checkpoint_round_trip_and_messages(tmp_path):
    model = widedeep.build_model(TINY, None, 5)
    path = tmp_path / "wd.weights.h5"
    model.save_weights(str(path))
    loaded = widedeep.build_model(TINY, str(path), 0)
    x = batch(16)
    np.testing.assert_array_equal(run(loaded, x), run(model, x))
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):
        widedeep.build_model(TINY, str(tmp_path / "missing.weights.h5"), 0)
    junk = tmp_path / "junk.weights.h5"
    junk.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="junk.weights.h5"):
        widedeep.build_model(TINY, str(junk), 0)
    with pytest.raises(ValueError, match="wd.weights.h5"):  # weights of another model
        widedeep.build_model({**TINY, "deep_hidden_units": [8]}, str(path), 0)


def test_savedmodel_round_trip_through_the_runner(tmp_path):
    model = widedeep.build_model(TINY, None, 2)
    keras_export.save_savedmodel(model, INPUTS, OUTPUTS, tmp_path / "model.savedmodel")
    runner = runners.load("tensorflow", tmp_path / "model.savedmodel",
                          runners.Options(inputs=tuple(t["name"] for t in INPUTS)))
    x = batch(24, wild_ids=True)
    out = runner(x)
    assert len(out) == 1 and out[0].shape == (24, 1)
    np.testing.assert_allclose(out[0], run(model, x), rtol=1e-6, atol=1e-7)
    fn = tf.saved_model.load(str(tmp_path / "model.savedmodel")).signatures["serving_default"]
    assert sorted(fn.structured_input_signature[1]) == sorted(t["name"] for t in INPUTS)
    assert list(fn.structured_outputs) == ["wide_deep_model"]


def test_both_configs_validate(tmp_path):
    settings = Settings(main_config())
    run_ = settings.run("widedeep-tiny", "cpu", "tf-savedmodel", "fp32")
    assert run_["model"]["plugin"] == "widedeep"
    assert run_["model"]["triton"]["max_batch_size"] == 64
    real = Settings(main_config(models_dir="config/models"))
    cpu = real.run("widedeep", "cpu", "tf-savedmodel", "fp32")
    gpu = real.run("widedeep", "a30", "tf-savedmodel", "fp32")
    assert cpu["model"]["triton"]["max_batch_size"] == 16384
    assert cpu["model"]["offline"]["batch_sizes"] == [1, 1024, 16384]
    assert gpu["model"]["triton"]["max_batch_size"] == 131072
    assert gpu["model"]["triton"]["instances"] == 2
    assert gpu["model"]["offline"]["batch_sizes"][-1] == 131072
    assert gpu["model"]["online"]["concurrency"] == list(range(8, 257, 8))


def test_fp16_export_is_refused_for_a_tensorflow_model(tmp_path):
    """A TensorFlow model exports FP32 only (DLE's W&D get_model ignores its precision too):
    its FP16 is TensorRT's or TF's auto mixed precision. Refused before the model loads."""
    from deploybench.steps.export import export

    spec = Settings(main_config()).export_settings("widedeep-tiny")
    with pytest.raises(ValueError, match=r"'widedeep' \(tensorflow\) exports 'onnx' in FP32 "
                                         "only.*set its export.precision to fp32"):
        export(spec, "onnx-fp16", tmp_path / "weights.pt", tmp_path / "eval.npz",
               tmp_path / "model.onnx")
