"""The Wide & Deep (Outbrain) plug-in (TensorFlow 2, Keras 3): seeded initialisation, the
wide + deep composition with DLE's multi-hot features, the parquet Outbrain layout, DLE's
MAP@12, weights files, the SavedModel and ONNX exports the toolkit makes of it, the
Triton tensors, and both model configs."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from deploybench import runners  # noqa: E402
from deploybench.models import widedeep  # noqa: E402
from deploybench.models.widedeep.net import DeepEmbeddings, WideLinear  # noqa: E402
from deploybench.settings.resolve import Settings  # noqa: E402
from deploybench.source import keras_export  # noqa: E402
from deploybench.triton import config as triton_config  # noqa: E402
from testkit.widedeep import (
    HOT,
    MULTI,
    NUMS,
    SIZES,
    TINY,
    TINY_CONFIG,
    C,
    data,  # noqa: F401 (a fixture)
    tf,
)
from testkit.workflow import main_config

ROOT = Path(__file__).resolve().parents[2]
FULL_CONFIG = yaml.safe_load((ROOT / "config/models/widedeep.yaml").read_text())
INPUTS = TINY_CONFIG["inputs"]
OUTPUTS = TINY_CONFIG["outputs"]
# DLE's data/outbrain/features.py at the reference's commit: MULTIHOT_COLUMNS (hotness 3) and
# their HASH_BUCKET_SIZES; trainer/model/widedeep.py's Keras inputs are INT32 for every
# categorical feature (one-hot (1,), multi-hot (hotness,)), FP32 for numerical ones.
DLE_MULTIHOT = {"topic_id_list": 350, "entity_id_list": 10000, "category_id_list": 100}


def batch(n=32, seed=0, wild_ids=False):
    """Random inputs: one-hot ids [n, 1], multi-hot lists [n, 3] of 0 to 3 ids padded
    with -1, numerical [n, 1]."""
    rng = np.random.default_rng(seed)
    ids = []
    for size, hot in zip(SIZES, HOT):
        if wild_ids:  # any INT32 id is valid: the model takes it modulo the table size
            x = rng.integers(-2 ** 31, 2 ** 31, (n, hot), dtype=np.int64)
        else:
            x = rng.integers(0, size, (n, hot))
        if hot > 1:
            x = np.abs(x) * rng.choice([1, 1, -1], (n, hot))  # some padding, any position
            x[x < 0] = -1
        ids.append(x.astype(np.int32))
    return ids + [rng.random((n, 1), dtype=np.float32) for _ in NUMS]


def reduced(x):
    """The ids the model looks up: one-hot ids and list ids modulo the table size,
    padding (-1) kept."""
    ids = [np.where(a < 0, -1, a % s) if h > 1 else np.mod(a, s)
           for a, s, h in zip(x[:C], SIZES, HOT)]
    return [a.astype(np.int32) for a in ids] + x[C:]


def rows(table, ids, hotness):
    """Sum of the table rows of each sample's ids (padding left out), as numpy."""
    table = np.asarray(table)
    if hotness == 1:
        return table[ids[:, 0]]
    return np.stack([table[r[r >= 0]].sum(axis=0) if (r >= 0).any()
                     else np.zeros(table.shape[1], table.dtype) for r in ids])


def run(model, inputs):
    return np.asarray(model(inputs, training=False))


def test_plugin_declares_tensorflow():
    assert widedeep.FRAMEWORK == "tensorflow"


def test_configs_name_the_features_as_inputs_in_order():
    for config in (TINY_CONFIG, FULL_CONFIG):
        cats = config["hparams"]["categorical_features"]
        names = [f["name"] for f in cats] + config["hparams"]["numerical_features"]
        assert [t["name"] for t in config["inputs"]] == names
        assert [t["dtype"] for t in config["inputs"]] == ["INT32"] * 16 + ["FP32"] * 13
        assert [t["dims"] for t in config["inputs"]] == [[1]] * 13 + [[3]] * 3 + [[1]] * 13
        assert [t["dims"] for t in config["inputs"][:16]] == [[f.get("hotness", 1)]
                                                               for f in cats]
        assert {f["name"]: f["cardinality"] for f in cats if "hotness" in f} == DLE_MULTIHOT
        assert config["hparams"]["combiner"] == "sum"  # DLE's --combiner default
        assert config["outputs"] == [{"name": "wide_deep_model", "dtype": "FP32", "dims": [1]}]
    # DLE's deep input: 3 x 128 + campaign 128 + 8 x 64 + platform 19 = 1043 one-hot, 3 x 64
    # multi-hot, + 13 numerical
    dims = [f["embedding_dim"] for f in FULL_CONFIG["hparams"]["categorical_features"]]
    assert sum(dims[:13]) == 1043 and dims[13:] == [64] * 3


def test_triton_tensors_are_int32_where_dle_took_int32():
    """The config.pbtxt Triton gets for the CPU backends names DLE's dtypes: INT32 ids,
    one-hot [1] and multi-hot [3], FP32 numerical features."""
    from tritonclient.grpc import model_config_pb2 as mc

    real = Settings(main_config(models_dir="config/models"))
    for backend in ("tf-savedmodel", "onnx"):
        run_ = real.run("widedeep", "cpu", backend, "fp32")
        config = triton_config.model_config("WidenDeep", run_)
        inputs = {i.name: (i.data_type, tuple(i.dims)) for i in config.input}
        for f in FULL_CONFIG["hparams"]["categorical_features"]:
            assert inputs.pop(f["name"]) == (mc.TYPE_INT32, (f.get("hotness", 1),))
        assert set(inputs.values()) == {(mc.TYPE_FP32, (1,))} and len(inputs) == 13


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
    np.testing.assert_allclose(run(model, wild), run(model, reduced(wild)), rtol=1e-6)
    # a numerical input or an id changes the output
    other = wild[:C] + [wild[C] + 1] + wild[C + 1:]
    assert not np.allclose(run(model, wild), run(model, other))
    other = [wild[0] + 1] + wild[1:]
    assert not np.allclose(run(model, wild), run(model, other))
    with pytest.raises(ValueError, match="takes 29 inputs"):
        model(wild[:28])


def test_multi_hot_lists_change_the_output_in_both_parts():
    """Each multi-hot feature counts in the wide and in the deep part: another id in a
    list changes both logits; padding, whatever its negative value, and the order of a
    list's ids do not (DLE sums the rows of a list's ids)."""
    model = widedeep.build_model(TINY, None, 3)
    x = batch(16)
    for i in MULTI:
        ids = x[i].copy()
        ids[:, 0] = np.where(ids[:, 0] == 7, 8, 7)  # another id in every list
        other = x[:i] + [ids] + x[i + 1:]
        for part in (model.wide_logit, model.deep_logit):
            assert not np.allclose(np.asarray(part(x)), np.asarray(part(other)))
        padding = np.where(x[i] < 0, -5, x[i]).astype(np.int32)
        shuffled = x[i][:, ::-1].copy()
        for same in (padding, shuffled):
            np.testing.assert_allclose(run(model, x[:i] + [same] + x[i + 1:]), run(model, x),
                                       rtol=1e-6)
    # a list of padding only adds nothing: the wide part is the other features' sum
    empty = [np.full_like(a, -1) if h > 1 else a for a, h in zip(x[:C], HOT)] + x[C:]
    one_hot_only = sum(rows(t, a, 1) for t, a, h in zip(model.wide.tables, x[:C], HOT)
                       if h == 1)
    np.testing.assert_allclose(np.asarray(model.wide_logit(empty)),
                               one_hot_only + np.asarray(model.wide.bias), rtol=1e-5,
                               atol=1e-6)


def test_mean_combiner_averages_a_lists_embeddings():
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    layer = DeepEmbeddings([6], [2], [3], combiner="mean")
    layer.tables[0].assign(table)
    ids = np.array([[1, 2, -1], [-1, -1, -1], [4, 10, 3]], np.int32)  # 10 mod 6 = 4
    got = np.asarray(layer([ids], []))
    np.testing.assert_allclose(got, [(table[1] + table[2]) / 2, [0, 0],
                                     (2 * table[4] + table[3]) / 3], rtol=1e-6)
    with pytest.raises(ValueError, match="combiner 'max'"):
        DeepEmbeddings([6], [2], [3], combiner="max")


def test_output_is_sigmoid_of_wide_plus_deep():
    model = widedeep.build_model(TINY, None, 1)
    x = batch(6)
    assert isinstance(model.wide, WideLinear) and isinstance(model.deep_input, DeepEmbeddings)
    wide = np.asarray(model.wide_logit(x))
    deep = np.asarray(model.deep_logit(x))
    assert wide.shape == deep.shape == (6, 1)
    np.testing.assert_allclose(run(model, x), 1 / (1 + np.exp(-(wide + deep))), rtol=1e-5,
                               atol=1e-6)
    # wide part: a per-id weight of each categorical feature (summed over a list's ids),
    # summed, plus a bias
    expected = sum(rows(t, a, h) for t, a, h in zip(model.wide.tables, x[:C], HOT))
    np.testing.assert_allclose(wide, expected + np.asarray(model.wide.bias), rtol=1e-5,
                               atol=1e-6)
    # deep part: embeddings (4 wide each; a list's rows summed, DLE's combiner) then
    # numerical, through the ReLU MLP
    emb = [rows(t, a, hot) for t, a, hot in zip(model.deep_input.tables, x[:C], HOT)]
    h = np.concatenate(emb + x[C:], axis=1)
    assert h.shape == (6, 16 * 4 + 13)
    for layer in model.deep_mlp:
        h = np.maximum(h @ np.asarray(layer.kernel) + np.asarray(layer.bias), 0)
    out = model.deep_logit_layer
    np.testing.assert_allclose(deep, h @ np.asarray(out.kernel) + np.asarray(out.bias),
                               rtol=1e-4, atol=1e-6)
    assert [layer.units for layer in model.deep_mlp] == [16, 8]


def test_full_size_tables_are_capped():
    from deploybench.models.widedeep.features import table_sizes

    hp = FULL_CONFIG["hparams"]
    assert table_sizes(hp)[:3] == [50000, 50000, 4]
    assert table_sizes({**hp, "max_table_size": None})[:2] == [250000, 300000]


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


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    model = widedeep.build_model(TINY, None, 2)
    keras_export.save_savedmodel(model, INPUTS, OUTPUTS, out / "model.savedmodel")
    keras_export.save_onnx(model, INPUTS, OUTPUTS, out / "model.onnx",
                           TINY_CONFIG["export"]["onnx_opset"])
    return model, out


def test_savedmodel_round_trip_through_the_runner(exported, data):
    model, out = exported
    runner = runners.load("tensorflow", out / "model.savedmodel",
                          runners.Options(inputs=tuple(t["name"] for t in INPUTS)))
    real, _ = widedeep.load_split(TINY, str(data), "valid", None)
    for x in (real, batch(24, wild_ids=True)):
        got = runner(x)
        assert len(got) == 1 and got[0].shape == (len(x[0]), 1)
        np.testing.assert_allclose(got[0], run(model, x), rtol=1e-6, atol=1e-7)
    fn = tf.saved_model.load(str(out / "model.savedmodel")).signatures["serving_default"]
    signature = fn.structured_input_signature[1]
    assert sorted(signature) == sorted(t["name"] for t in INPUTS)
    assert signature["topic_id_list"].dtype == tf.int32
    assert signature["topic_id_list"].shape.as_list() == [None, 3]
    assert list(fn.structured_outputs) == ["wide_deep_model"]


def test_onnx_export_matches_keras_on_generated_batches(exported, data):
    """tf2onnx's graph takes DLE's INT32 tensors and gives the Keras model's
    probabilities on real generated samples (lists with padding among them)."""
    import onnxruntime as ort

    model, out = exported
    session = ort.InferenceSession(str(out / "model.onnx"))
    assert [(i.name, i.type, i.shape[1:]) for i in session.get_inputs()] == [
        (t["name"], "tensor(int32)" if t["dtype"] == "INT32" else "tensor(float)", t["dims"])
        for t in INPUTS]
    runner = runners.load("onnxruntime", out / "model.onnx",
                          runners.Options(inputs=tuple(t["name"] for t in INPUTS)))
    real, _ = widedeep.load_split(TINY, str(data), "valid", None)
    for start in range(0, len(real[0]), 64):  # the tiny config's batches
        x = [a[start:start + 64] for a in real]
        np.testing.assert_allclose(runner(x)[0], run(model, x), rtol=1e-5, atol=1e-6)
    wild = batch(24, wild_ids=True)
    np.testing.assert_allclose(runner(wild)[0], run(model, wild), rtol=1e-5, atol=1e-6)


def test_the_fp16_conversion_loads_and_keeps_the_id_arithmetic_fp32(exported, data, tmp_path):
    """The `onnx_fp16` key converts the FP32 export: tf2onnx's id arithmetic (ids cast to
    float, compared with 0) stays FP32, so the graph loads (an H200 refused the plain
    conversion's, 2026-11-29) and the probabilities match the Keras model to FP16 rounding,
    wild ids among them."""
    import onnx
    import onnxruntime as ort

    from deploybench.runners import onnxruntime as ort_runner

    model, out = exported
    converted = tmp_path / "model_fp16.onnx"
    assert ort_runner.convert("onnxruntime", out / "model.onnx", converted,
                              runners.Options(inputs=(), precision="fp16"))
    graph = onnx.load(str(converted)).graph
    kept = set(ort_runner.integer_casts(onnx.load(str(out / "model.onnx"))))
    casts = [n for n in graph.node if n.name in kept and n.op_type == "Cast"]
    assert casts and all(a.i == onnx.TensorProto.FLOAT for n in casts for a in n.attribute)
    assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in graph.initializer)
    session = ort.InferenceSession(str(converted), providers=["CPUExecutionProvider"])
    real, _ = widedeep.load_split(TINY, str(data), "valid", None)
    for x in ([a[:64] for a in real], batch(24, wild_ids=True)):
        got = session.run(None, {t["name"]: a for t, a in zip(INPUTS, x)})[0]
        np.testing.assert_allclose(got, run(model, x), rtol=0, atol=2e-3)


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
