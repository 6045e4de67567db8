"""The recommender ensemble (backends hps-*): the hierarchical embedding storage against
the full tables, the sparse export, and the generated ensemble repositories (python,
framework-backend and Merlin HPS servers) parsed back and wired end to end."""

import json
import sys

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2 as mc

from deploybench import artifacts
from deploybench.ensemble import parts as ensemble_parts
from deploybench.ensemble import requests as ensemble_requests
from deploybench.runners.embeddings import (
    STORAGE,
)
from deploybench.settings.config import ConfigError
from deploybench.triton import config as triton_config
from testkit.ensemble import sparse_dir
from testkit.tensorrt_stand_in import StandInTensorRT, stand_in_plan
from testkit.workflow import ROOT, needs


def dense_onnx(path, run, meta):
    """A stand-in dense graph with the dense part's tensors (the repository reads them)."""
    types = {"INT32": TensorProto.INT32, "INT64": TensorProto.INT64, "FP32": TensorProto.FLOAT}
    inputs = ensemble_parts.dense_inputs(run["model"], meta)
    graph = helper.make_graph(
        [helper.make_node("Concat", [t["name"] for t in inputs], ["cat"], axis=1),
         helper.make_node("ReduceSum", ["cat"], ["DENSE_OUTPUT"], axes=[1], keepdims=1)],
        "dense",
        [helper.make_tensor_value_info(t["name"], types[t["dtype"]], ["b", *t["dims"]])
         for t in inputs],
        [helper.make_tensor_value_info("DENSE_OUTPUT", TensorProto.FLOAT, ["b", 1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)


def dense_savedmodel(path, run, meta):
    """A stand-in dense SavedModel with the dense part's tensors (a tensorflow backend's
    config is checked against its signature)."""
    tf = needs("tensorflow")
    from deploybench.source import keras_export

    def model(tensors, training=False):
        floats = [tf.cast(t, tf.float32) for t in tensors]
        return tf.reduce_sum(tf.concat(floats, axis=1), axis=1, keepdims=True)

    keras_export.save_savedmodel(model, ensemble_parts.dense_inputs(run["model"], meta),
                                 run["model"]["outputs"], path)


SERVERS = {"embedded": ["python"],
           "ngc": ["onnxruntime", "python", "pytorch", "tensorflow", "tensorrt"],
           "hps": ["hps", "onnxruntime", "python", "tensorflow", "tensorrt"]}


@pytest.mark.parametrize("gpu, graphs, want", [("h100", True, "64"), ("h100", False, None),
                                               ("cpu", True, None)])
def test_the_dense_part_on_a_gpu_asks_for_cuda_graphs_up_to_the_split_batch(
        settings, tmp_path, gpu, graphs, want):
    """`triton.cuda_graphs` (the reference's setting) reaches the C++ backend's ONNX Runtime
    engine on a GPU as the largest batch to capture: the batch the unbatched dense part was
    split from (dlrm-tiny's 64), not its max_batch_size 0; none on the CPU or when off."""
    run = settings.run("dlrm-tiny", gpu, "hps-onnx", "fp16" if gpu != "cpu" else "fp32")
    run["model"]["triton"]["cuda_graphs"] = graphs
    converted = tmp_path / "model.ensemble"
    sparse_dir(converted / "sparse", sizes=[50] * 26, dim=8)
    meta = ensemble_parts.read_metadata(converted / "sparse")
    drun = ensemble_parts.dense_run(run, meta)
    (converted / "dense").mkdir()
    dense_onnx(converted / "dense" / drun["artifact"], run, meta)
    repo = tmp_path / "repo"
    artifacts.of(run).repository(run, converted, repo, ["deploybench", "python"])
    dense = triton_config.read(repo / "dlrm-tiny-dense" / "config.pbtxt")
    assert dense.backend == "deploybench" and dense.max_batch_size == 0
    got = dense.parameters["cuda_graphs"].string_value if "cuda_graphs" in dense.parameters \
        else None
    assert got == want
    assert not dense.model_warmup  # its dims vary: the first request of a bucket captures


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("backend, gpu", [("hps-onnx", "cpu"), ("hps-trt", "h100"),
                                          ("hps-tf-savedmodel", "h100")])
def test_ensemble_repository_is_wired_and_parses(settings, tmp_path, server, backend, gpu,
                                                 monkeypatch):
    run = settings.run("dlrm-tiny", gpu, backend, "fp32")
    converted = tmp_path / "model.ensemble"
    sparse_dir(converted / "sparse", sizes=[50] * 26, dim=8)
    meta = ensemble_parts.read_metadata(converted / "sparse")
    drun = ensemble_parts.dense_run(run, meta)
    (converted / "dense").mkdir()
    artifact = converted / "dense" / drun["artifact"]
    if artifact.suffix == ".onnx":
        dense_onnx(artifact, run, meta)
    elif artifact.suffix == ".savedmodel":
        dense_savedmodel(artifact, run, meta)
    else:  # a TensorRT plan, read through a stand-in of TensorRT's bindings
        monkeypatch.setitem(sys.modules, "tensorrt", StandInTensorRT)
        dense = ensemble_parts.dense_inputs(run["model"], meta), run["model"]["outputs"]
        stand_in_plan(artifact, *dense)
    repo = tmp_path / "repo"
    served = artifacts.of(run).repository(run, converted, repo, SERVERS[server])

    configs = {p.parent.name: triton_config.read(p) for p in repo.glob("*/config.pbtxt")}
    top = configs.pop("dlrm-tiny")
    # reference 003's flattened interface: one request per batch, the batch inside the tensors
    assert top.platform == "ensemble" and top.max_batch_size == 0
    assert [(t.name, t.data_type, list(t.dims)) for t in top.input] == [
        ("EMB_KEY", mc.TYPE_INT64, [-1]), ("EMB_N_KEY", mc.TYPE_INT32, [1]),
        ("numerical_features", mc.TYPE_FP32, [-1, 13])]
    assert [(t.name, t.data_type, list(t.dims)) for t in top.output] == [
        ("DENSE_OUTPUT", mc.TYPE_FP32, [-1, 1])]
    assert json.loads(top.parameters["table_sizes"].string_value) == [50] * 26
    # every tensor a step reads is an ensemble input or an earlier step's output, every
    # step tensor is one its model declares, and the steps produce the ensemble's outputs
    available = {t.name for t in top.input}
    for step in top.ensemble_scheduling.step:
        part = configs.pop(step.model_name)
        assert set(step.input_map) == {t.name for t in part.input}, step.model_name
        assert set(step.input_map.values()) <= available, step.model_name
        assert set(step.output_map) <= {t.name for t in part.output}, step.model_name
        available |= set(step.output_map.values())
    assert not configs  # no model left out of the steps
    assert {t.name for t in top.output} <= available

    steps = [s.model_name for s in top.ensemble_scheduling.step]
    assert steps[-1] == "dlrm-tiny-dense"
    dense = triton_config.read(repo / "dlrm-tiny-dense" / "config.pbtxt")
    lookup = next(t for t in dense.input if t.name == "LOOKUP_VECTORS")
    assert list(lookup.dims) == [-1, 26 * 8] and dense.max_batch_size == 0
    assert not dense.HasField("dynamic_batching")  # Triton refuses one without a batch dim
    assert steps == ["dlrm-tiny-sparse", "dlrm-tiny-dense"]
    sparse_step = top.ensemble_scheduling.step[0]
    if server == "hps":
        # the keys go straight to HPS: the ensemble's EMB_KEY, EMB_N_KEY are its KEYS, NUMKEYS
        assert dict(sparse_step.input_map) == {"KEYS": "EMB_KEY", "NUMKEYS": "EMB_N_KEY"}
        hps_model = triton_config.read(repo / "dlrm-tiny-sparse/config.pbtxt")
        assert hps_model.backend == "hps" and hps_model.max_batch_size == 0
        # HPS's tensors as DLE's deployment/hps/deploy_sparse.py declares them
        assert [(t.name, t.data_type, list(t.dims)) for t in hps_model.input] == [
            ("KEYS", mc.TYPE_INT64, [-1]), ("NUMKEYS", mc.TYPE_INT32, [-1])]
        assert [(t.name, t.data_type, list(t.dims)) for t in hps_model.output] == [
            ("OUTPUT0", mc.TYPE_FP32, [-1])]
        hps = json.loads((repo / "dlrm-tiny-sparse/sparse.json").read_text())["models"][0]
        assert hps["gpucacheper"] == 0.1 and hps["embedding_vecsize_per_table"] == [8]
        assert hps["maxnum_catfeature_query_per_table_per_sample"] == [26]
        files = repo / "dlrm-tiny-sparse/1/embeddings"
        assert (files / "emb_vector").stat().st_size == 26 * 50 * 8 * 4
        np.testing.assert_array_equal(np.fromfile(files / "key", np.int64), np.arange(26 * 50))
        assert served.startswith("ensemble (Merlin HPS sparse")
    else:
        sparse = triton_config.read(repo / "dlrm-tiny-sparse/config.pbtxt")
        assert sparse.backend == "python" and sparse.max_batch_size == 0
        assert [(t.name, t.data_type, list(t.dims)) for t in sparse.input] == [
            ("EMB_KEY", mc.TYPE_INT64, [-1]), ("EMB_N_KEY", mc.TYPE_INT32, [1])]
        assert [(t.name, list(t.dims)) for t in sparse.output] == [
            ("LOOKUP_VECTORS", [-1, 26 * 8])]
        assert sparse.parameters["cache_fraction"].string_value == "0.1"
        assert (repo / "dlrm-tiny-sparse/1/sparse" / STORAGE).is_file()
        assert served.startswith("ensemble (python sparse")
    serving = {"embedded": "python", "ngc": drun["backend"]["triton_backend"]}.get(server)
    if serving:
        assert dense.backend == serving or dense.platform.startswith(serving), dense


def test_an_ensemble_needs_a_model_with_an_ensemble_section(settings):
    with pytest.raises(ConfigError, match="backend 'hps-onnx' deploys a sparse/dense ensemble; "
                                          "model 'bert-tiny' has no `ensemble` section"):
        settings.run("bert-tiny", "cpu", "hps-onnx", "fp32")
    with pytest.raises(ConfigError, match="'hps-trt' .* needs an NVIDIA GPU"):
        settings.run("dlrm-tiny", "cpu", "hps-trt", "fp32")


def test_the_offline_scenario_serves_a_static_copy_of_the_repository(settings, tmp_path):
    """Loading an ensemble reloads its parts from the repository: the offline scenario's
    copy has their configs without dynamic batching, and links to everything else."""
    run = settings.run("dlrm-tiny", "cpu", "hps-onnx", "fp32")
    converted = tmp_path / "model.ensemble"
    sparse_dir(converted / "sparse", sizes=[50] * 26, dim=8)
    (converted / "dense").mkdir()
    dense_onnx(converted / "dense/model.onnx", run,
               ensemble_parts.read_metadata(converted / "sparse"))
    repo = tmp_path / "repo"
    artifacts.of(run).repository(run, converted, repo, ["python"])

    copy = artifacts.scenario(repo, tmp_path / "offline", True, False)
    assert copy == tmp_path / "offline"
    for model in ("dlrm-tiny", "dlrm-tiny-sparse", "dlrm-tiny-dense"):
        written = triton_config.read(repo / model / "config.pbtxt")
        served = triton_config.read(copy / model / "config.pbtxt")
        assert not served.HasField("dynamic_batching")
        written.ClearField("dynamic_batching")
        assert served == written
        assert (copy / model / "1").resolve() == (repo / model / "1").resolve()
    assert (copy / "dlrm-tiny-sparse/1/sparse" / STORAGE).is_file()


def test_online_is_refused_for_an_ensemble_with_the_reason(settings):
    from deploybench.settings.run_facts import online_refusal, serves_online

    assert serves_online(settings.run("dlrm-tiny", "cpu", "onnx", "fp32"))
    for backend, gpu in (("hps-onnx", "cpu"), ("hps-trt", "h100"),
                         ("hps-tf-savedmodel", "cpu")):
        run = settings.run("dlrm-tiny", gpu, backend, "fp32")
        assert not serves_online(run)
        assert online_refusal(run).startswith(
            f"no online scenario for backend '{backend}' (")
        assert "one request per batch" in online_refusal(run)
        assert "dynamic batching cannot apply" in online_refusal(run)


def test_the_request_steps_of_an_ensemble_read_its_section(settings):
    """Accuracy and offline make the ensemble's requests from its `ensemble` section (a
    change to it re-runs them), offline from its data too; what only offline sends
    (perf_samples, warmup_samples) re-runs nothing else, the exports included; a single
    model's steps keep their settings without them."""
    from deploybench.settings.step_specs import step_spec

    ensemble = settings.run("dlrm-tiny", "cpu", "hps-onnx", "fp32")
    single = settings.run("dlrm-tiny", "cpu", "onnx", "fp32")
    offline = step_spec(ensemble, "offline")["model"]
    assert offline["ensemble"] == ensemble["model"]["ensemble"]
    assert offline["ensemble"]["perf_samples"] == 100 and offline["data"]["split"] == "test"
    for step in ("accuracy", "convert", "native", "model_repository"):
        section = step_spec(ensemble, step)["model"]["ensemble"]
        assert "perf_samples" not in section and "warmup_samples" not in section, step
    assert set(settings.split_export_settings("dlrm-tiny")["ensemble"]) == {
        "sparse_input", "lookup", "frequency_split"}
    for step in ("accuracy", "offline"):
        assert "ensemble" not in step_spec(single, step)["model"]
        assert "hparams" not in step_spec(single, "offline")["model"]


def test_perf_data_of_a_batch_size_is_its_requests_in_turn(settings, tmp_path):
    model = settings.run("dlrm-tiny", "cpu", "hps-onnx", "fp32")["model"]
    samples = [np.arange(5 * 13, dtype=np.float32).reshape(5, 13),
               np.arange(5 * 26, dtype=np.int32).reshape(5, 26)]
    data = json.loads(ensemble_requests.perf_data(model, [1000] * 26, samples, 2,
                                                  tmp_path / "d.json").read_text())["data"]
    assert len(data) == 3  # ceil(5 / 2) requests of 2 consecutive samples, wrapping
    numerical = [np.asarray(e["numerical_features"]["content"]).reshape(2, 13)[:, 0]
                 for e in data]
    assert [n.tolist() for n in numerical] == [[0, 13], [26, 39], [52, 0]]
    assert data[2]["EMB_KEY"]["shape"] == [52] and data[2]["EMB_N_KEY"]["content"] == [52]


@pytest.mark.parametrize("model", ["dlrm", "dcnv2"])
def test_the_references_offline_protocol_on_gpu_keys_small_on_the_cpu(model):
    """Reference 003's evaluate_latency samples and evaluate_accuracy warm-up on GPU keys
    (device_overrides), small counts on the CPU so that its run stays short."""
    from deploybench.settings.resolve import Settings
    from deploybench.settings.step_specs import step_spec

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    gpu = step_spec(settings.run(model, "a100", "hps-trt", "fp32"), "offline")["model"]
    assert gpu["ensemble"]["perf_samples"] == 262144
    assert gpu["ensemble"]["warmup_samples"] == 1000 * 16384
    assert gpu["accuracy"]["batch_size"] == 16384  # the warm-up's requests
    cpu = step_spec(settings.run(model, "cpu", "hps-onnx", "fp32"), "offline")["model"]
    assert cpu["ensemble"]["perf_samples"] == 4096
    assert cpu["ensemble"]["warmup_samples"] == 16384 and cpu["accuracy"]["batch_size"] == 4096
