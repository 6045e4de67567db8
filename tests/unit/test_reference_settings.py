"""The configurations that reproduce the reference documents run as those documents did:
the recommenders' server memory pools, TensorRT's settings and profiles, perf_analyzer's
command lines (protocol, windows, warm-up) and every published table's configuration."""

import re

import pytest
import yaml

from deploybench.settings.config import ConfigError
from deploybench.settings.resolve import Settings
from testkit.workflow import ROOT


@pytest.mark.parametrize("model", ["dlrm", "dcnv2"])
def test_recommenders_servers_take_the_references_memory_pools(model):
    """Reference 003's deploy command: --pinned-memory-pool-byte-size=4000000000
    --cuda-memory-pool-byte-size=0:2000000000, on a GPU; the CPU key keeps the defaults."""
    from deploybench.triton.server import server_flags

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    gpu = settings.run(model, "a30", "trt", "fp16")["model"]["triton"]
    assert server_flags(gpu["server"]) == ["--cuda-memory-pool-byte-size=0:2000000000",
                                           "--pinned-memory-pool-byte-size=4000000000"]
    assert "server" not in settings.run(model, "cpu", "onnx", "fp32")["model"]["triton"]


@pytest.mark.parametrize(("model", "backend", "triton_backend", "reference_bytes", "graphs"), [
    ("tft", "trt", "tensorrt", 10_000_000_000, True),  # reference 002: 10 GB, capture graphs
    ("tft-traffic", "trt", "tensorrt", 10_000_000_000, True),
    ("bert", "ort-trt", "onnxruntime", 8_589_934_592, False),  # reference 004: 8 GiB
    ("widedeep", "trt", "tensorrt", 8_589_934_592, True),  # reference 000: 8 GiB, graphs
])
def test_tensorrt_settings_follow_the_references_deploy_commands(model, backend, triton_backend,
                                                                 reference_bytes, graphs):
    from deploybench.single import options
    from deploybench.triton import config as triton_config

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    run = settings.run(model, "a30", backend, "fp16")
    workspace = options(run).workspace_mb << 20  # what the engine build gets
    assert 0 <= workspace - reference_bytes < 1 << 20
    config = triton_config.model_config(model, run, triton_backend)
    assert config.optimization.cuda.graphs is graphs
    if backend == "ort-trt":  # the accelerator's own workspace
        accel = config.optimization.execution_accelerators.gpu_execution_accelerator[0]
        assert int(accel.parameters["max_workspace_size_bytes"]) == workspace
    if model == "widedeep":  # the reference leaves the dynamic batcher's delay at Triton's 0
        assert config.dynamic_batching.max_queue_delay_microseconds == 0


class _Server:  # what perf_analyzer.command reads of a running server
    install = type("Install", (), {"perf_analyzer": "perf_analyzer"})()
    grpc_url, http_url, version = "localhost:8001", "localhost:8000", "1"
    served_name = staticmethod(lambda name: name)


def _perf_commands(run: dict, scenario: str, monkeypatch) -> tuple[list[str], list[list[str]]]:
    """The first measured row's command line and the warm-up's, as they would run."""
    import subprocess
    from pathlib import Path

    from deploybench.triton import perf_analyzer

    class Log(list):
        write, flush = list.append, lambda self: None

    sweep = perf_analyzer.sweep(run, scenario)
    row = perf_analyzer.command(run, scenario, _Server, sweep[0], Path("d.json"), Path("o.csv"))
    log = Log()
    server = type("S", (_Server,), {"env": None, "keep_fds": (),
                                   "ensure_alive": lambda self: None})()
    monkeypatch.setattr(perf_analyzer, "run_client",
                        lambda server, cmd, timeout_s=None: subprocess.CompletedProcess(
                            cmd, 0, "", ""))
    perf_analyzer.warm_up(run, scenario, server, sweep, Path("d.json"), Path("w"), log)
    mark = "[warm-up, discarded] $ "
    return row, [line[len(mark):].split() for line in log if line.startswith(mark)]


def _flags(command: list[str]) -> dict:
    return {k: command[i + 1] for i, k in enumerate(command[:-1]) if k.startswith("-")}


@pytest.mark.parametrize("model, scenario, expected, warm", [
    # TFT and Wide & Deep: run_performance_on_triton.py's HTTP default, --warmup (2 windows):
    # offline its smallest and largest batch, online half its top concurrency and the top
    ("tft", "offline",
     {"-i": "http", "--shared-memory": "system", "--measurement-request-count": "500"},
     [{"-b": "1", "--measurement-request-count": "1000"},
      {"-b": "1024", "--measurement-request-count": "1000"}]),
    ("tft", "online",
     {"-i": "http", "--concurrency-range": "8:8", "--measurement-request-count": "500"},
     [{"--concurrency-range": "128:128", "--measurement-request-count": "1000"},
      {"--concurrency-range": "256:256", "--measurement-request-count": "1000"}]),
    ("widedeep", "offline", {"-i": "http", "--measurement-request-count": "100"},
     [{"-b": "1", "--measurement-request-count": "200"}]),
    # DLRM: HTTP, 50 requests in 5-second windows, no warm-up run
    ("dlrm", "offline", {"-i": "http", "--shared-memory": "system", "-p": "5000",
                         "--measurement-request-count": "50"}, []),
    # BERT: gRPC, the runner's default request count, no warm-up
    ("bert", "offline", {"-i": "grpc", "--shared-memory": "system",
                         "--measurement-request-count": "50"}, []),
    # FastPitch: HTTP, no shared memory, 10-second time windows; its warmup.py: one 60-s
    # window at batch 1 at concurrency 8 and 16, before the offline and the online sweep
    ("fastpitch", "offline", {"-i": "http", "--measurement-mode": "time_windows",
                              "-p": "10000"},
     [{"-b": "1", "--concurrency-range": "8:8", "-p": "60000"},
      {"-b": "1", "--concurrency-range": "16:16", "-p": "60000"}]),
    ("fastpitch", "online", {"-i": "http", "--measurement-mode": "time_windows",
                             "-p": "10000", "-b": "1", "--concurrency-range": "1:1"},
     [{"--concurrency-range": "8:8", "-p": "60000"},
      {"--concurrency-range": "16:16", "-p": "60000"}]),
])
def test_perf_analyzer_runs_as_each_reference_ran_it(model, scenario, expected, warm, monkeypatch):
    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    run = settings.run(model, "a100", "onnx" if model != "dlrm" else "tf-savedmodel", "fp32")
    command, warm_ups = _perf_commands(run, scenario, monkeypatch)
    flags = _flags(command)
    assert {k: flags.get(k) for k in expected} == expected, command
    assert flags["-s"] == "10"  # perf_analyzer's own stability, which every reference kept
    if model == "fastpitch":
        assert "--shared-memory" not in flags and "--measurement-request-count" not in flags
    # the warm-up: each level of the document's runner in each shared-memory mode, the
    # measured rows' flags at that level, a longer window (the first mode's shown here), any
    # spread accepted: three windows a level (run_facts.WARM_UP_WINDOWS)
    from deploybench.triton import perf_analyzer

    modes = {row.shared_memory for row in perf_analyzer.sweep(run, scenario)}
    assert len(warm_ups) == len(warm) * len(modes), warm_ups
    sized = "--output-shared-memory-size"  # the outputs of its batch
    for warm_up, level in zip(warm_ups, warm):
        assert ({k: v for k, v in _flags(warm_up).items() if k != sized}
                == {k: v for k, v in {**flags, **level, "-f": "w/warm-up.csv",
                                        "-s": str(perf_analyzer.ANY_SPREAD)}.items()
                    if k != sized})


def test_cpu_runs_keep_a_looser_stability_and_bad_override_keys_are_named():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    settings = Settings(config)
    assert settings.run("tft", "cpu", "onnx", "fp32")["perf"]["stability_percentage"] == 30
    assert settings.run("tft", "h100", "onnx", "fp32")["perf"]["stability_percentage"] == 10
    with pytest.raises(ConfigError, match="perf_overrides key .* 'a1OO'.*valid .*a100"):
        Settings({**config, "perf_overrides": {"a1OO": {"stability_percentage": 5}}})


def test_the_matrix_holds_every_gpu_of_the_references_tables():
    import pandas as pd

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    published = set(pd.read_csv(ROOT / "config/reference/tables.csv")["gpu_key"])
    assert published == {"a30", "a40", "a100", "v100", "t4"}
    assert published <= set(config["matrix"]["gpus"])


def test_a_published_table_without_its_configuration_is_named(tmp_path):
    import shutil

    shutil.copytree(ROOT / "config/models", tmp_path, dirs_exist_ok=True)
    path = tmp_path / "bert.yaml"
    path.write_text(path.read_text().replace('    "ONNX Runtime FP16": onnx_fp16\n', ""))
    settings = Settings({**yaml.safe_load((ROOT / "config/config.yaml").read_text()),
                         "models_dir": str(tmp_path)})
    with pytest.raises(ConfigError, match="model 'bert': the published table 'ONNX Runtime "
                                          "FP16' of 004_0e3f950e04427afa.txt has no "
                                          "configuration in reference.pairs"):
        settings.reference_targets()


@pytest.mark.parametrize("model, backend, opt", [
    ("dlrm", "hps-trt", 1024),  # the reference's dense TensorRT build
    ("dcnv2", "hps-trt", 1024),
    ("tft", "trt", 1024),  # the largest preferred batch size where a reference states none
    ("bert", "trt", 16),
])
def test_tensorrt_profiles_are_optimised_for_the_references_batch(model, backend, opt):
    from deploybench.single import options

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    assert options(settings.run(model, "a100", backend, "fp16")).opt_batch_size == opt


# The documents' deploy and benchmark commands, in their excerpts (committed: a fresh clone
# has no ../shared/seeds; test_reference_documents checks them against the documents)
DOCUMENTS = ROOT / "tests" / "data" / "reference_documents"


def _differences(model: str) -> list[str]:
    return yaml.safe_load((ROOT / f"config/models/{model}.yaml").read_text())[
        "reference"]["differences"]


@pytest.mark.parametrize("model", ["tft", "tft-traffic", "bert", "fastpitch", "widedeep"])
def test_where_the_pipeline_waits_and_retries_otherwise_than_the_runner_it_says_so(model):
    """The documents' deploy commands give --load-model-timeout-s (100 or 120 s) and their
    runner retries a level with longer windows up to 10 times: each model's differences
    name the document's value beside the pipeline's, read from config.yaml."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    document = yaml.safe_load((ROOT / f"config/models/{model}.yaml").read_text())[
        "reference"]["document"]
    timeouts = set(re.findall(r"--load-model-timeout-s (\d+)",
                              (DOCUMENTS / document).read_text(errors="replace")))
    assert len(timeouts) == 1, timeouts
    said = [d for d in _differences(model) if "load_timeout_s" in d]
    assert len(said) == 1
    assert f"up to {config['server']['load_timeout_s']} s" in said[0]
    assert f"--load-model-timeout-s {timeouts.pop()}." in said[0]
    retries = [d for d in _differences(model) if "perf.attempts" in d]
    assert len(retries) == 1 and f"up to {config['perf']['attempts']} times" in retries[0]
    assert "up to 10 runs" in retries[0]


def test_wide_and_deeps_perf_input_and_the_recommenders_samples_are_said():
    """W&D's runner sends --input-data random, the pipeline its evaluation samples; DLRM's
    and DCNv2's document benchmarks 262,144 samples, the generated test split holds fewer."""
    from deploybench.steps.source import PERF_SAMPLES

    text = (DOCUMENTS / "000_ed20038684edc44b.txt").read_text(errors="replace")
    assert "--input-data random" in text
    (said,) = [d for d in _differences("widedeep") if "PERF_SAMPLES" in d]
    assert f"first {PERF_SAMPLES} samples" in said and "--input-data random" in said
    text = (DOCUMENTS / "003_c41fefe0334b576a.txt").read_text(errors="replace")
    (published,) = set(re.findall(r"--num-benchmark-samples (\d+)", text))
    for model in ("dlrm", "dcnv2"):
        config = yaml.safe_load((ROOT / f"config/models/{model}.yaml").read_text())
        samples = config["device_overrides"]["gpu"]["ensemble"]["perf_samples"]
        distinct = config["data"]["generate"]["n_test"]
        assert samples == int(published) and distinct < samples
        (said,) = [d for d in _differences(model) if "n_test" in d]
        assert f"{samples:,} samples" in said
        assert f"the generated test split has {distinct:,}" in said
        assert f"cycled {({2: 'twice', 4: 'four times'})[samples // distinct]}" in said
