"""The DLRM / DCNv2 plug-in (TensorFlow 2, Keras 3): seeded initialisation, both
architectures, DLE's split binary Criteo data, the AUC metric, weights files, and the
SavedModel (and ONNX) exports the toolkit makes of it."""

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from testkit.workflow import needs

tf = needs("tensorflow")
keras = needs("keras")

from deploybench.models import dlrm  # noqa: E402
from deploybench.models.dlrm import data as dlrm_data  # noqa: E402
from deploybench.models.dlrm.net import DenseDCNv2, DenseDLRM, SparseEmbeddings  # noqa: E402

TINY_CONFIG = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "config/models/dlrm-tiny.yaml").read_text())
TINY = TINY_CONFIG["hparams"]
TINY_DCN = {**TINY, "architecture": "dcnv2", "num_cross_layers": 3,
            "cross_layer_projection_dim": 4}
SIZES = [min(c, 50) for c in TINY["cardinalities"]]
INPUTS = TINY_CONFIG["inputs"]
OUTPUTS = TINY_CONFIG["outputs"]


def batch(n=32, seed=0, wild_ids=False):
    rng = np.random.default_rng(seed)
    numerical = rng.random((n, 13), dtype=np.float32) * 3
    if wild_ids:  # any INT32 id is valid: the model takes it modulo the table size
        ids = rng.integers(-2 ** 31, 2 ** 31, (n, 26), dtype=np.int32)
    else:
        ids = rng.integers(0, SIZES, (n, 26)).astype(np.int32)
    return [numerical, ids]


def run(model, inputs):
    return np.asarray(model(inputs, training=False))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("criteo")
    dlrm.generate_dataset(TINY, str(out), seed=3, n_train=40, n_test=100)
    return out


def test_plugin_declares_tensorflow():
    assert dlrm.FRAMEWORK == "tensorflow"


def test_seeded_init_is_deterministic():
    a, b = dlrm.build_model(TINY, None, 7), dlrm.build_model(TINY, None, 7)
    c = dlrm.build_model(TINY, None, 8)
    wa, wb, wc = a.get_weights(), b.get_weights(), c.get_weights()
    assert len(wa) == len(wb) and all(np.array_equal(x, y) for x, y in zip(wa, wb))
    assert not all(np.array_equal(x, y) for x, y in zip(wa, wc))
    x = batch()
    np.testing.assert_array_equal(run(a, x), run(b, x))


def test_distinct_layers_get_distinct_initial_values():
    model = dlrm.build_model(TINY, None, 0)
    tables = [np.asarray(t) for t in model.sparse.tables]
    big = [t for t in tables if t.shape[0] == 50]
    assert not np.array_equal(big[0], big[1])
    for table, rows in zip(tables, SIZES):  # DLE's U(-sqrt(1/rows), sqrt(1/rows))
        assert table.shape == (rows, 8)
        assert np.abs(table).max() <= math.sqrt(1 / rows) + 1e-7


@pytest.mark.parametrize("hparams", [TINY, TINY_DCN], ids=["dlrm", "dcnv2"])
def test_output_is_a_probability_per_sample(hparams):
    model = dlrm.build_model(hparams, None, 0)
    y = run(model, batch(32))
    assert y.shape == (32, 1) and y.dtype == np.float32
    assert ((y > 0) & (y < 1)).all() and y.std() > 0
    # ids outside the tables (even negative) are reduced modulo the table size
    wild = batch(32, wild_ids=True)
    reduced = [wild[0], np.mod(wild[1], SIZES)]
    np.testing.assert_allclose(run(model, wild), run(model, reduced), rtol=1e-6)
    # a different numerical input or id changes the output
    other = [wild[0] + 1, wild[1]]
    assert not np.allclose(run(model, wild), run(model, other))
    # INT32 ids (as served) and the same ids as INT64 look up the same rows: same bits;
    # INT64 ids beyond INT32 are reduced as before
    np.testing.assert_array_equal(run(model, wild), run(model, [wild[0], wild[1].astype(np.int64)]))
    big = wild[1].astype(np.int64) + np.int64(2 ** 40) * np.asarray(SIZES)
    np.testing.assert_array_equal(run(model, [wild[0], big]), run(model, wild))


# DLE's Triton tensors of the whole model (deployment/tf/deploy_ensemble.py and
# deploy_monolithic.py; evaluate_latency.py's create_input_data_tf sends the categorical
# features as np.int32): name -> (dtype, dims)
DLE_TENSORS = {"numerical_features": ("FP32", [13]), "categorical_features": ("INT32", [26]),
               "DENSE_OUTPUT": ("FP32", [1])}


@pytest.mark.parametrize("path", ["config/models/dlrm.yaml", "config/models/dcnv2.yaml",
                                  "tests/config/models/dlrm-tiny.yaml",
                                  "tests/config/models/dcnv2-tiny.yaml"])
def test_the_config_declares_dles_tensors(path):
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / path).read_text())
    declared = {t["name"]: (t["dtype"], t["dims"]) for t in config["inputs"] + config["outputs"]}
    assert declared == DLE_TENSORS


def test_dlrm_and_dcnv2_have_their_dense_parts():
    m1, m2 = dlrm.build_model(TINY, None, 0), dlrm.build_model(TINY_DCN, None, 0)
    assert isinstance(m1.sparse, SparseEmbeddings) and isinstance(m2.sparse, SparseEmbeddings)
    assert isinstance(m1.dense_part, DenseDLRM) and isinstance(m2.dense_part, DenseDCNv2)
    # the sparse part alone: [B, 26 * dim]; the dense part alone gives the logit
    x = batch(5)
    lookups = m1.sparse(x[1])
    assert tuple(lookups.shape) == (5, 26 * 8)
    logit = np.asarray(m1.dense_part(x[0], lookups))
    np.testing.assert_allclose(1 / (1 + np.exp(-logit)), run(m1, x), rtol=1e-5, atol=1e-6)
    # DLE's padded shapes: bottom MLP input 13 -> 16; DLRM top input 27*26/2 + 8 = 359 -> 360
    assert m1.dense_part.bottom_mlp[0].kernel.shape == (16, 16)
    assert m1.dense_part.top_mlp[0].kernel.shape == (360, 16)
    # DCNv2: low-rank crosses over [bottom MLP out, embeddings] (8 + 26*8 = 216 wide)
    d = m2.dense_part
    assert len(d.cross_u) == 3 and d.cross_u[0].kernel.shape == (216, 4)
    assert d.cross_v[0].kernel.shape == (4, 216) and d.top_mlp[0].kernel.shape == (216, 16)


def test_dlrm_interaction_matches_a_numpy_reference():
    model = dlrm.build_model(TINY, None, 1)
    x = batch(4)
    d = model.dense_part
    bottom = np.pad(x[0], [[0, 0], [0, 3]])
    for layer in d.bottom_mlp:
        bottom = np.maximum(bottom @ np.asarray(layer.kernel) + np.asarray(layer.bias), 0)
    emb = np.asarray(model.sparse(x[1])).reshape(4, 26, 8)
    feats = np.concatenate([bottom[:, None, :], emb], axis=1)
    dots = np.einsum("bij,bkj->bik", feats, feats)
    lower = np.stack([dots[:, i, j] for i in range(27) for j in range(i)], axis=1)
    top = np.pad(np.concatenate([bottom, lower], axis=1), [[0, 0], [0, 1]])
    for i, layer in enumerate(d.top_mlp):
        top = top @ np.asarray(layer.kernel) + np.asarray(layer.bias)
        if i < len(d.top_mlp) - 1:
            top = np.maximum(top, 0)
    np.testing.assert_allclose(run(model, x), 1 / (1 + np.exp(-top)), rtol=1e-4, atol=1e-6)


def test_unknown_architecture_is_refused():
    with pytest.raises(ValueError, match="unknown architecture 'wide'"):
        dlrm.build_model({**TINY, "architecture": "wide"}, None, 0)


def test_generated_data_has_dle_split_binary_layout(data, tmp_path):
    spec = yaml.safe_load((data / "feature_spec.yaml").read_text())
    assert set(spec) == {"feature_spec", "source_spec", "channel_spec", "metadata"}
    assert spec["channel_spec"]["numerical"] == [f"num_{i}" for i in range(13)]
    assert spec["channel_spec"]["categorical"] == [f"cat_{i}.bin" for i in range(26)]
    assert spec["feature_spec"]["label"] == {"dtype": "bool"}
    assert spec["feature_spec"]["cat_0.bin"] == {"dtype": "int8", "cardinality": 50}
    assert spec["feature_spec"]["cat_4.bin"] == {"dtype": "int8", "cardinality": 11}
    for split, n in (("train", 40), ("test", 100)):
        files = sorted(p.name for p in (data / split).iterdir())
        assert files == sorted(["label.bin", "numerical.bin"] + [f"cat_{i}.bin" for i in range(26)])
        assert (data / split / "label.bin").stat().st_size == n
        assert (data / split / "numerical.bin").stat().st_size == n * 13 * 2  # float16
        assert (data / split / "cat_3.bin").stat().st_size == n  # int8
    assert dlrm_data.categorical_dtype(126) == np.int8
    assert dlrm_data.categorical_dtype(127) == np.int16
    assert dlrm_data.categorical_dtype(45833188) == np.int32
    # seeded
    dlrm.generate_dataset(TINY, str(tmp_path / "a"), seed=3, n_train=40, n_test=100)
    dlrm.generate_dataset(TINY, str(tmp_path / "b"), seed=4, n_train=40, n_test=100)
    same = (tmp_path / "a/test/numerical.bin").read_bytes()
    assert same == (data / "test/numerical.bin").read_bytes()
    assert (tmp_path / "b/test/numerical.bin").read_bytes() != same


def test_load_split_round_trips_what_was_generated(data):
    rng = np.random.default_rng(3)
    dlrm_data.synthesize(rng, 40, 13, SIZES)  # train comes first
    label, numerical, ids = dlrm_data.synthesize(rng, 100, 13, SIZES)
    inputs, targets = dlrm.load_split(TINY, str(data), "test", None)
    assert [a.dtype for a in inputs] == [np.float32, np.int32]
    assert [a.shape for a in inputs] == [(100, 13), (100, 26)]
    np.testing.assert_array_equal(inputs[0], numerical.astype(np.float32))
    np.testing.assert_array_equal(inputs[1], ids)
    assert targets[0].shape == (100, 1) and targets[0].dtype == np.float32
    np.testing.assert_array_equal(targets[0][:, 0], label.astype(np.float32))
    assert 0 < label.mean() < 1
    assert (ids >= 0).all() and (ids < np.asarray(SIZES)).all()
    first, first_t = dlrm.load_split(TINY, str(data), "test", 10)
    np.testing.assert_array_equal(first[1], ids[:10])
    np.testing.assert_array_equal(first_t[0][:, 0], label[:10])
    with pytest.raises(ValueError, match="no split 'valid'"):
        dlrm.load_split(TINY, str(data), "valid", None)


def test_ids_wider_than_dles_int32_are_refused(data, tmp_path):
    spec = yaml.safe_load((data / "feature_spec.yaml").read_text())
    spec["feature_spec"]["cat_3.bin"]["dtype"] = "int64"
    copy = tmp_path / "criteo"
    copy.mkdir()
    (copy / "test").symlink_to(data / "test")
    (copy / "feature_spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match="'cat_3.bin' is stored as int64; DLE's ids are at "
                                         "most int32"):
        dlrm.load_split(TINY, str(copy), "test", None)


def test_auc_on_hand_computed_examples():
    # pairs (positive, negative): 0.35 > 0.1, 0.35 < 0.4, 0.8 > both: 3 of 4
    auc = dlrm.roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    assert auc == pytest.approx(0.75)
    # a tie between a positive and a negative counts one half: (0.5 + 1 + 2) / 4
    auc = dlrm.roc_auc(np.array([0, 1, 0, 1]), np.array([0.5, 0.5, 0.2, 0.9]))
    assert auc == pytest.approx(0.875)
    labels = np.array([1, 0, 1, 1, 0, 0, 1, 0], dtype=np.float32)
    assert dlrm.roc_auc(labels, labels * 0.6 + 0.2) == 1.0
    assert dlrm.roc_auc(labels, 1 - labels) == 0.0
    assert dlrm.roc_auc(labels, np.full(8, 0.3)) == 0.5
    assert math.isnan(dlrm.roc_auc(np.ones(3), np.arange(3.0)))
    metrics = dlrm.evaluate(TINY, [np.array([[0.9], [0.2]])], [np.array([[1.0], [0.0]])])
    assert metrics["auc"] == 1.0
    assert metrics["log_loss"] == pytest.approx(-(math.log(0.9) + math.log(0.8)) / 2)


def test_auc_matches_sklearn_if_installed():
    sklearn_metrics = needs("sklearn.metrics")
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    scores = np.round(rng.random(500), 2)  # many ties
    assert dlrm.roc_auc(labels, scores) == pytest.approx(
        sklearn_metrics.roc_auc_score(labels, scores))


def test_checkpoint_round_trip_and_messages(tmp_path):
    model = dlrm.build_model(TINY_DCN, None, 5)
    path = tmp_path / "dcn.weights.h5"
    model.save_weights(str(path))
    loaded = dlrm.build_model(TINY_DCN, str(path), 0)
    x = batch(16)
    np.testing.assert_array_equal(run(loaded, x), run(model, x))
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):
        dlrm.build_model(TINY, str(tmp_path / "missing.weights.h5"), 0)
    junk = tmp_path / "junk.weights.h5"
    junk.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="junk.weights.h5"):
        dlrm.build_model(TINY, str(junk), 0)
    with pytest.raises(ValueError, match="dcn.weights.h5"):  # weights of another model
        dlrm.build_model(TINY, str(path), 0)


def _signature():
    dtypes = {"FP32": tf.float32, "INT32": tf.int32}
    return [tf.TensorSpec([None, *t["dims"]], dtypes[t["dtype"]], name=t["name"])
            for t in INPUTS]


@pytest.mark.parametrize("hparams", [TINY, TINY_DCN], ids=["dlrm", "dcnv2"])
def test_savedmodel_round_trip(hparams, tmp_path):
    model = dlrm.build_model(hparams, None, 2)
    module = tf.Module()
    module.model = model

    @tf.function(input_signature=_signature())
    def serving_default(*tensors):
        return {OUTPUTS[0]["name"]: module.model(list(tensors), training=False)}

    tf.saved_model.save(module, str(tmp_path / "sm"),
                        signatures={"serving_default": serving_default})
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    fn = loaded.signatures["serving_default"]
    assert sorted(fn.structured_input_signature[1]) == ["categorical_features",
                                                        "numerical_features"]
    x = batch(24, wild_ids=True)
    out = fn(numerical_features=tf.constant(x[0]), categorical_features=tf.constant(x[1]))
    assert list(out) == ["DENSE_OUTPUT"]
    # the same weights; a graph may fuse ops differently from eager Keras: within 1 ulp
    np.testing.assert_allclose(out["DENSE_OUTPUT"].numpy(), run(model, x), rtol=1e-6,
                               atol=1e-7)
    # the loaded model keeps the weights: the same graph again gives the same bits
    again = fn(numerical_features=tf.constant(x[0]), categorical_features=tf.constant(x[1]))
    np.testing.assert_array_equal(again["DENSE_OUTPUT"].numpy(), out["DENSE_OUTPUT"].numpy())
    graph = tf.function(lambda a, b: module.model([a, b], training=False))
    np.testing.assert_array_equal(out["DENSE_OUTPUT"].numpy(),
                                  graph(tf.constant(x[0]), tf.constant(x[1])).numpy())


def test_onnx_export_if_available(tmp_path):
    tf2onnx = needs("tf2onnx")
    ort = needs("onnxruntime")
    model = dlrm.build_model(TINY, None, 2)

    @tf.function(input_signature=_signature())
    def ordered(*tensors):
        return tf.identity(model(list(tensors), training=False), name="DENSE_OUTPUT")

    proto, _ = tf2onnx.convert.from_function(ordered, input_signature=_signature(), opset=17)
    path = tmp_path / "model.onnx"
    path.write_bytes(proto.SerializeToString())
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = batch(24, wild_ids=True)
    feeds = dict(zip([i.name for i in session.get_inputs()], x))
    np.testing.assert_allclose(session.run(None, feeds)[0], run(model, x), rtol=1e-5,
                               atol=1e-6)
