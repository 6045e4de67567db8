"""The BERT, FastPitch, DLRM and Wide & Deep (TensorFlow) plug-ins end to end: real
Snakemake runs of their tiny configurations (tests/config/models) through the real
embedded Triton and perf_analyzer, and their GPU keys, planned here but refused with the
reason when a step would run."""

import json
import re
from importlib.metadata import version

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from tritonclient.grpc import model_config_pb2 as mc

from deploybench.measurement.device import gpu_names
from deploybench.records.tables import PERF_COLUMNS as COLUMNS
from deploybench.records.tables import THROUGHPUT, measured_columns
from deploybench.reporting.markdown import markdown_table
from deploybench.triton import config as triton_config
from testkit.measured import check_littles_law, check_measurements, flag, perf_commands
from testkit.workflow import ROOT, TINY, needs, planned_jobs, snakemake

MODELS = ROOT / "tests/config/models"
BERT = "results/bert-tiny/cpu/onnx_fp32"
FASTPITCH = "results/fastpitch-tiny/cpu/ts-trace_fp32"
DLRM = "results/dlrm-tiny/cpu/tf-savedmodel_fp32"
WIDEDEEP = "results/widedeep-tiny/cpu/onnx_fp32"
DCNV2 = "results/dcnv2-tiny/cpu/onnx_fp32"
DLRM_ENSEMBLE = "results/dlrm-tiny/cpu/hps-onnx_fp32"
BERT_METRICS = {"exact_match", "f1"}
FASTPITCH_METRICS = {
    "mel_in_range_fraction", "mel_frames_total", "mel_frames_mean", "frames_per_symbol",
    "at_max_frames_fraction", "length_mismatch_fraction", "duration_mean", "pitch_mean",
    "truncated_text_fraction",
}


def model_config(name: str) -> dict:
    return yaml.safe_load((MODELS / f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tiny models' CPU reports, built by one Snakemake run in one workdir (the
    tiny config's models_dir holds every tiny model; targets pick the configurations)."""
    needs("tensorflow")  # the tf extra: DLRM is a Keras model
    work = tmp_path_factory.mktemp("models")
    snakemake(work, *(f"{run}/README.md"
                      for run in (BERT, FASTPITCH, DLRM, DCNV2, WIDEDEEP, DLRM_ENSEMBLE)))
    return work


def check_configuration(work, run_dir: str, model: str, ensemble: bool = False) -> pd.DataFrame:
    """What every configuration report must hold; returns its accuracy table. `ensemble`:
    an hps-* configuration, offline only, one request a batch (ensemble.requests)."""
    run, config = work / run_dir, model_config(model)
    outputs = [t["name"] for t in config["outputs"]]

    check = pd.read_csv(run / "conversion_check.csv")
    assert list(check["output"]) == outputs
    assert check["passed"].all(), check

    accuracy = pd.read_csv(run / "accuracy.csv")
    deviations = accuracy[accuracy["kind"] == "deviation"]
    assert list(deviations["name"]) == [f"max_abs_deviation:{o}" for o in outputs]
    assert deviations["passed"].astype(str).eq("True").all(), deviations
    assert (deviations["limit"] == config["accuracy"]["max_abs_deviation"]["fp32"]).all()

    offline = pd.read_csv(run / "offline.csv")
    assert list(offline.columns)[:len(COLUMNS)] == COLUMNS  # telemetry after the references'
    assert list(offline["Batch"]) == config["offline"]["batch_sizes"]
    assert set(offline["Concurrency"]) == {1}
    scenarios = ("offline",) if ensemble else ("offline", "online")
    tables = {s: pd.read_csv(run / f"{s}.csv") for s in scenarios}
    if ensemble:  # no online scenario (run_facts.serves_online): nothing of it is made
        assert not (run / "online.csv").exists()
        assert not (run / "plots/online_latency.png").exists()
    else:
        online = tables["online"]
        assert list(online["Concurrency"]) == config["online"]["concurrency"]
        assert set(online["Batch"]) == {config["online"]["batch_size"]}
    for table in tables.values():
        assert (table["Inferences/Second"] > 0).all(), table
        assert (table["avg latency (ms)"] > 0).all(), table

    check_measurements(run, config, online=not ensemble, flattened=ensemble)

    for png in ["offline_throughput", "offline_latency", *(["online_latency"] * (not ensemble))]:
        assert (run / f"plots/{png}.png").read_bytes()[:4] == b"\x89PNG"

    prov = {}
    for scenario in scenarios:
        report = json.loads((run / f"{scenario}.json").read_text())
        assert report["scenario"] == scenario
        prov[scenario] = report["provenance"]
        assert prov[scenario]["key"] == {"model": model, "gpu": "cpu",
                                         "backend": run.name.split("_")[0],
                                         "precision": "fp32"}
        assert prov[scenario]["triton"]["name"] == "triton"
        assert re.fullmatch(r"\d+\.\d+\.\d+", prov[scenario]["triton"]["version"])
        # the versions that ran, as installed here
        assert prov[scenario]["packages"]["tritonclient"] == version("tritonclient")
        assert version("tritonclient") in prov[scenario]["perf_analyzer"]
        assert prov[scenario]["server"]["perf_analyzer"].endswith("perf_analyzer")
        assert prov[scenario]["device_check"]["gpu_key"] == "cpu"
        assert prov[scenario]["device_check"]["mismatch_allowed"] is False
    assert ensemble or prov["offline"]["triton"] == prov["online"]["triton"]

    readme = (run / "README.md").read_text()
    assert readme.startswith(f"# {config['title']}: CPU only")
    assert f"| Triton server | {prov['offline']['triton']['version']} (embedded" in readme
    assert f"| perf_analyzer | {prov['offline']['perf_analyzer']} |" in readme
    offline_section = readme.split("## Offline scenario")[1].split("\n## ")[0]
    # the report's tables: the references' columns (telemetry has a section of its own)
    assert markdown_table(measured_columns(offline)) in offline_section
    online_section = readme.split("## Online scenario")[1].split("\n## ")[0]
    if ensemble:
        assert online_section.strip().startswith("Not measured: no online scenario for backend")
    else:
        assert markdown_table(measured_columns(online)) in online_section
    assert "](plots/offline_throughput.png)" in readme
    assert "## Serving overhead: Triton vs native" in readme
    return accuracy


def test_bert_tiny_end_to_end(built):
    accuracy = check_configuration(built, BERT, "bert-tiny")
    metrics = accuracy[accuracy["kind"] == "metric"].set_index("name")
    assert set(metrics.index) == BERT_METRICS
    assert ((metrics["triton"] - metrics["source"]).abs() < 1e-6).all(), metrics
    assert 0 <= metrics.loc["exact_match", "triton"] <= metrics.loc["f1", "triton"] <= 100
    assert set(accuracy["kind"]) == {"metric", "deviation"}  # no integer outputs
    check_per_batch_deployments(built / BERT)


def check_per_batch_deployments(run):
    """bert-tiny's onnx deploys once per offline batch size (triton.deployments per_batch,
    reference 004): each offline batch measured on its own model, online and accuracy on the
    largest, as the perf_analyzer command lines, the JSONs and the report say."""
    config = model_config("bert-tiny")
    batches = config["offline"]["batch_sizes"]
    names = {b: f"bert-tiny_b{b}" for b in batches}
    configs = {p.parent.name: triton_config.read(p)
               for p in (run / "model_repository").glob("*/config.pbtxt")}
    assert {n: c.max_batch_size for n, c in configs.items()} == {
        names[b]: b for b in batches}
    ran = [(flag(c, "-m"), flag(c, "-b"))
           for c in perf_commands(run / "logs/offline_perf_analyzer.log")]
    assert list(dict.fromkeys(ran)) == [(names[b], str(b)) for b in batches], ran
    assert {flag(c, "-m") for c in perf_commands(run / "logs/online_perf_analyzer.log")} \
        == {names[max(batches)]}
    offline = pd.read_csv(run / "offline.csv")
    report = json.loads((run / "offline.json").read_text())
    assert [(r["Batch"], r["model"], r["max_batch_size"]) for r in report["deployments"]] \
        == [(b, names[b], b) for b in offline["Batch"]]
    # each row's batch is its deployment's whole max batch; the numbers are its own:
    # batch x concurrency / latency (Little's law) per row, and more inferences per second
    # at the larger batch (a tiny model's cost is per request on 2 cores)
    check_littles_law(offline, "offline per batch")
    assert offline["Inferences/Second"].is_monotonic_increasing, offline
    online = json.loads((run / "online.json").read_text())["deployments"]
    assert {(r["model"], r["max_batch_size"]) for r in online} == {
        (names[max(batches)], max(batches))}
    accuracy = json.loads((run / "accuracy.json").read_text())["deployment"]
    assert accuracy == {"model": names[max(batches)], "max_batch_size": max(batches)}
    assert f"deployment '{names[max(batches)]}'" in (run / "logs/accuracy.log").read_text()
    readme = (run / "README.md").read_text()
    assert f"batch {batches[0]}: `{names[batches[0]]}` (max batch {batches[0]})" in readme


def test_dlrm_tiny_end_to_end_from_a_savedmodel(built):
    accuracy = check_configuration(built, DLRM, "dlrm-tiny")
    metrics = accuracy[accuracy["kind"] == "metric"].set_index("name")
    assert set(metrics.index) == {"auc", "log_loss"}
    assert ((metrics["triton"] - metrics["source"]).abs() < 1e-5).all(), metrics
    assert 0 <= metrics.loc["auc", "triton"] <= 1
    served = built / DLRM / "model_repository/dlrm-tiny/1/model.savedmodel"
    assert (served / "saved_model.pb").is_file()  # a SavedModel folder, as Triton's own
    check_dle_inputs(built, DLRM, "dlrm-tiny")
    import tensorflow as tf

    signature = tf.saved_model.load(str(served)).signatures["serving_default"]
    assert signature.structured_input_signature[1]["categorical_features"].dtype == tf.int32


def check_dle_inputs(work, run_dir: str, model: str) -> None:
    """DLE's Triton inputs (INT32 ids), in the served config and in the perf data."""
    config = triton_config.read(work / run_dir / f"model_repository/{model}/config.pbtxt")
    assert [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in config.input] == [
        ("numerical_features", "TYPE_FP32", [13]), ("categorical_features", "TYPE_INT32", [26])]
    perf = json.loads((work / f"results/{model}/source/perf_data.json").read_text())["data"]
    assert set(perf[0]) == {"numerical_features", "categorical_features"}
    ids = np.asarray([e["categorical_features"]["content"] for e in perf])
    assert ids.shape == (len(perf), 26) and (ids >= 0).all() and ids.max() < 2 ** 31


def test_dcnv2_tiny_end_to_end_through_tf2onnx(built):
    accuracy = check_configuration(built, DCNV2, "dcnv2-tiny")
    metrics = accuracy[accuracy["kind"] == "metric"].set_index("name")
    assert set(metrics.index) == {"auc", "log_loss"}
    assert ((metrics["triton"] - metrics["source"]).abs() < 1e-5).all(), metrics
    check_dle_inputs(built, DCNV2, "dcnv2-tiny")
    import onnx

    graph = onnx.load(str(built / DCNV2 / "converted/model.onnx")).graph
    ids = next(i for i in graph.input if i.name == "categorical_features")
    assert ids.type.tensor_type.elem_type == onnx.TensorProto.INT32


def test_dlrm_tiny_ensemble_end_to_end(built):
    """Reference 003's shape: sparse model (hierarchical embeddings) -> dense ONNX model, one
    Triton ensemble, with the device cache's hit rate in every report."""
    accuracy = check_configuration(built, DLRM_ENSEMBLE, "dlrm-tiny", ensemble=True)
    metrics = accuracy[accuracy["kind"] == "metric"].set_index("name")
    assert ((metrics["triton"] - metrics["source"]).abs() < 1e-5).all(), metrics
    # the same AUC as the single model: the ensemble serves the same function
    single = pd.read_csv(built / DLRM / "accuracy.csv").set_index("name")
    assert abs(metrics.loc["auc", "triton"] - single.loc["auc", "triton"]) < 1e-6

    run = built / DLRM_ENSEMBLE
    report = json.loads((run / "accuracy.json").read_text())
    cache = report["embedding_cache"]
    assert cache["lookups"] == 26 * report["samples"]  # one lookup per table and sample
    assert 0 < cache["hit_rate"] < 1 and len(cache["per_table_hit_rate"]) == 26
    server = report["provenance"]["server"]
    assert server["ensemble_parts"] == {"dlrm-tiny-sparse": "deploybench",
                                        "dlrm-tiny-dense": "deploybench"}
    assert server["engines"] == {"dlrm-tiny-sparse": "embeddings",
                                 "dlrm-tiny-dense": "onnxruntime"}
    cache = json.loads((run / "offline.json").read_text())["embedding_cache"]
    assert cache["lookups"] > 0 and 0 < cache["hit_rate"] < 1
    assert "## Embedding cache (sparse model)" in (run / "README.md").read_text()

    # the dense model has no embedding tables: it takes the looked-up vectors
    import onnx

    dense = onnx.load(str(run / "converted/model.ensemble/dense/model.onnx"))
    assert [i.name for i in dense.graph.input] == ["numerical_features", "LOOKUP_VECTORS"]
    meta = json.loads((run / "converted/model.ensemble/sparse/sparse.json").read_text())
    tables = sum(meta["table_sizes"]) * meta["embedding_dim"]
    weights = torch.load(built / "results/dlrm-tiny/source/weights.pt", weights_only=True)
    full = sum(t.numel() for t in weights["keras_weights"])
    dense_params = sum(int(np.prod(i.dims)) for i in dense.graph.initializer)
    # every dense weight is in the graph (with a few of tf2onnx's constants), no table is
    assert full - tables <= dense_params < full - tables // 2, (dense_params, full, tables)


# The ensemble's interface, its accuracy and its offline requests (deploybench.ensemble)
def test_served_ensemble_takes_the_flattened_interface(built):
    repo = built / DLRM_ENSEMBLE / "model_repository"
    top = triton_config.read(repo / "dlrm-tiny/config.pbtxt")
    assert top.platform == "ensemble" and top.max_batch_size == 0
    assert [(t.name, t.data_type, list(t.dims)) for t in top.input] == [
        ("EMB_KEY", mc.TYPE_INT64, [-1]), ("EMB_N_KEY", mc.TYPE_INT32, [1]),
        ("numerical_features", mc.TYPE_FP32, [-1, 13])]
    for part in ("dlrm-tiny-sparse", "dlrm-tiny-dense"):
        assert triton_config.read(repo / part / "config.pbtxt").max_batch_size == 0


def test_served_ensemble_predicts_as_the_source_model(built):
    run = built / DLRM_ENSEMBLE
    check = pd.read_csv(run / "conversion_check.csv")  # the in-process runner's request
    assert check["passed"].all() and check["max_abs_error"].max() < 1e-5, check
    accuracy = pd.read_csv(run / "accuracy.csv").set_index("name")
    assert abs(accuracy.loc["auc", "triton"] - accuracy.loc["auc", "source"]) < 1e-9
    assert accuracy.loc["max_abs_deviation:DENSE_OUTPUT", "triton"] < 1e-5
    report = json.loads((run / "accuracy.json").read_text())
    cache = report["embedding_cache"]  # the sparse model's counters, per table and sample
    assert cache["lookups"] == 26 * report["samples"] and 0 < cache["hit_rate"] < 1


def test_offline_sends_one_request_a_batch_and_counts_its_samples(built):
    run = built / DLRM_ENSEMBLE
    offline = pd.read_csv(run / "offline.csv")
    assert list(offline["Batch"]) == [1, 64]  # the batch column is B
    report = json.loads((run / "offline.json").read_text())
    for row, sent in zip(offline.to_dict("records"), report["requests"], strict=True):
        batch = row["Batch"]
        assert sent["Batch"] == sent["samples_per_request"] == batch
        # inferences/second = B x requests/s (the reference's rows count samples; the CSV rounded)
        assert row[THROUGHPUT] == pytest.approx(batch * sent["requests/s"], abs=1e-3)
        assert sent["request_shapes"] == {"EMB_KEY": [26 * batch], "EMB_N_KEY": [1],
                                          "numerical_features": [batch, 13]}
    check_littles_law(offline, "offline")  # B x concurrency / latency: requests carry B
    commands = perf_commands(run / "logs/offline_perf_analyzer.log")
    assert [flag(c, "-b") for c in commands] == ["1", "1"]
    for command, batch in zip(commands, (1, 64)):
        assert f"--shape=EMB_KEY:{26 * batch}" in command
        assert f"--shape=numerical_features:{batch},13" in command
    # the reference's protocol at the tiny config's counts: requests made of ensemble.perf_samples
    # samples of the test split, after a cache warm-up of warmup_samples training samples
    assert report["request_samples"] == {"samples": 100, "source": "split test",
                                         "distinct": 100}
    log = (run / "logs/offline_perf_analyzer.log").read_text()
    steps = re.findall(r"Successfully read data for 1 stream/streams with (\d+) step", log)
    assert steps[:2] == ["100", "2"], steps  # ceil(100 / B) requests at B = 1, 64
    warmup = report["cache_warmup"]
    assert {k: v for k, v in warmup.items() if k != "seconds"} == {
        "samples": 128, "batch_size": 64, "requests": 2, "split": "train", "distinct": 64}
    assert warmup["seconds"] > 0
    # the session's lookups: the warm-up's and the measured requests', 26 a sample
    assert report["embedding_cache"]["lookups"] >= 26 * (128 + 100)


def test_widedeep_tiny_end_to_end_through_tf2onnx(built):
    accuracy = check_configuration(built, WIDEDEEP, "widedeep-tiny")
    metrics = accuracy[accuracy["kind"] == "metric"].set_index("name")
    assert list(metrics.index) == ["map_at_12"]
    assert abs(metrics.loc["map_at_12", "triton"] - metrics.loc["map_at_12", "source"]) < 1e-6
    assert 0 < metrics.loc["map_at_12", "triton"] <= 1


def test_fastpitch_tiny_end_to_end(built):
    accuracy = check_configuration(built, FASTPITCH, "fastpitch-tiny")
    metrics = accuracy[accuracy["kind"] == "metric"].set_index("name")
    assert set(metrics.index) == FASTPITCH_METRICS
    assert ((metrics["triton"] - metrics["source"]).abs() < 1e-6).all(), metrics
    total = metrics.loc["mel_frames_total", "triton"]
    assert total == int(total) > 0
    # The mel lengths (OUTPUT__1, INT64): every sample's length as the source model's.
    agreement = accuracy[accuracy["kind"] == "agreement"]
    assert list(agreement["name"]) == ["agreement:OUTPUT__1"]
    assert agreement["triton"].iloc[0] == 1.0


GPU_TARGETS = [
    "results/bert-tiny/h100/trt_fp16/README.md",
    "results/bert-tiny/h100/ort-trt_fp16/README.md",
    "results/fastpitch-tiny/h100/ts-trace_fp16/README.md",
    "results/fastpitch-tiny/h100/trt_fp16/README.md",
    "results/dlrm-tiny/h100/hps-trt_fp16/README.md",  # reuses the CPU ensemble's exports
]


def test_gpu_keys_of_the_new_models_dry_run(built):
    result = snakemake(built, "-n", *GPU_TARGETS)
    jobs = planned_jobs(result)
    # every configuration measured offline; online all but the hps-* ensemble (offline-only)
    assert jobs["offline"] == jobs["online"] + 1 == len(GPU_TARGETS), jobs
    assert jobs["configuration_report"] == jobs["accuracy"] == len(GPU_TARGETS), jobs
    # The CPU build's weights, data and exports are reused: only FastPitch's ONNX and BERT's
    # FP16 one (its TensorRT rows export at the run's precision) are new.
    assert "weights" not in jobs and "eval_set" not in jobs and jobs["export"] == 2, jobs
    assert "output: results/fastpitch-tiny/export/onnx/model.onnx" in result.stdout
    assert "output: results/bert-tiny/export/onnx-fp16/model.onnx" in result.stdout
    assert "output: results/bert-tiny/h100/trt_fp16/converted/model.plan" in result.stdout
    assert "output: results/bert-tiny/h100/ort-trt_fp16/converted/model.onnx" in result.stdout
    assert "output: results/dlrm-tiny/h100/hps-trt_fp16/converted/model.ensemble" in result.stdout
    assert "sparse_export" not in jobs, jobs

    refused = snakemake(built, "-n", "results/fastpitch-tiny/h100/ort-trt_fp16/README.md",
                        check=False)
    assert refused.returncode != 0
    assert ("backend 'ort-trt' is not configured for model 'fastpitch-tiny'; its backends: "
            "onnx, trt, ts-trace, ts-script, aoti, torch-compile") in (
        refused.stdout + refused.stderr)
    refused = snakemake(built, "-n", "results/bert-tiny/cpu/trt_fp32/README.md", check=False)
    assert refused.returncode != 0
    assert "backend 'trt' (NVIDIA TensorRT) needs an NVIDIA GPU; GPU key 'cpu' is cpu" in (
        refused.stdout + refused.stderr)


@pytest.mark.skipif(bool(gpu_names()), reason="this machine has an NVIDIA GPU")
def test_tensorrt_conversion_is_refused_here_with_the_reason(built, tmp_path):
    run = built / "results/bert-tiny/h100/trt_fp16"
    target = str(run.relative_to(built) / "conversion_check.csv")
    log = run / "logs/convert_model.plan.log"  # the engine is built on the device

    result = snakemake(built, target, check=False)
    assert result.returncode != 0
    assert ("GPU key 'h100' needs a device whose name contains 'H100'; this machine has: "
            "no NVIDIA GPU (CPU only)") in log.read_text()

    # Past the device check, the missing TensorRT itself is named.
    allow = tmp_path / "allow.yaml"
    allow.write_text(yaml.safe_dump({"allow_gpu_mismatch": True}))
    result = snakemake(built, target, "--configfile", str(TINY), str(allow), check=False)
    assert result.returncode != 0
    assert "backend 'trt' needs the TensorRT Python package" in log.read_text()
    assert not (run / "converted").exists() or not any((run / "converted").iterdir())
    assert not (run / "conversion_check.csv").exists()
