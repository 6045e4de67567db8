"""Bad keys and impossible combinations are refused early, naming what would be valid."""

import pytest
import yaml

from deploybench.settings.config import ConfigError
from deploybench.settings.resolve import Settings
from deploybench.settings.step_specs import step_spec
from testkit.workflow import ROOT, main_config


def test_run_resolves_the_device_overrides(settings):
    run = settings.run("tft-tiny", "cpu", "onnx", "fp32")
    assert run["artifact"] == "model.onnx"
    assert run["gpu"]["kind"] == "cpu"
    real = Settings(main_config(models_dir="config/models"))
    cpu, gpu = real.run("tft", "cpu", "onnx", "fp32"), real.run("tft", "h100", "onnx", "fp16")
    assert cpu["model"]["triton"]["max_batch_size"] == 64  # device_overrides.cpu
    assert gpu["model"]["triton"]["max_batch_size"] == 1024  # the reference's
    assert gpu["model"]["online"]["concurrency"][-1] == 256


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (("tft-nope", "cpu", "onnx", "fp32"),
         "unknown model 'tft-nope'; valid models: bert-tiny, dcnv2-tiny, dlrm-tiny, "
         "fastpitch-tiny, tft-tiny, widedeep-tiny"),
        (("tft-tiny", "a31", "onnx", "fp32"), "unknown GPU key 'a31'; valid GPU keys: a100, a30"),
        (("tft-tiny", "cpu", "tensorflow", "fp32"), "unknown backend 'tensorflow'; valid backends"),
        (("tft-tiny", "cpu", "onnx", "int4"), "unknown precision 'int4'; valid precisions: fp16"),
        (("tft-tiny", "cpu", "onnx", "fp16"), "precision 'fp16' cannot run on GPU key 'cpu'"),
        (("tft-tiny", "cpu", "trt", "fp32"), "backend 'trt' (NVIDIA TensorRT) needs an NVIDIA GPU"),
        (("tft-tiny", "cpu", "ts-trace-cg", "fp32"),
         "(PyTorch (TorchScript trace + CUDA graphs)) needs an NVIDIA GPU"),
        (("tft-tiny", "cpu", "aoti-cg", "fp32"),
         "(PyTorch 2 (AOTInductor + CUDA graphs)) needs an NVIDIA GPU"),
    ],
)
def test_bad_keys_are_refused_with_the_valid_ones(settings, key, message):
    with pytest.raises(ConfigError, match=None) as err:
        settings.run(*key)
    assert message in str(err.value)


def test_schema_errors_name_the_value_and_place():
    with pytest.raises(ConfigError, match="server/kind"):
        Settings(main_config(server={"kind": "docker-magic"}))


def test_batch_sizes_beyond_max_batch_size_are_refused(tmp_path):
    import yaml

    from testkit.workflow import ROOT

    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    model["offline"]["batch_sizes"] = [1, 16]
    (tmp_path / "tft-tiny.yaml").write_text(yaml.safe_dump(model))
    bad = Settings(main_config(models_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match=r"offline.batch_sizes \[16\] exceed .* 8"):
        bad.run("tft-tiny", "cpu", "onnx", "fp32")


def test_step_specs_hold_only_what_the_step_reads(settings):
    run = settings.run("tft-tiny", "cpu", "onnx", "fp32")
    assert "online" not in step_spec(run, "offline")["model"]
    assert "offline" not in step_spec(run, "online")["model"]
    assert "online" not in step_spec(run, "convert")["model"]
    assert "perf" not in step_spec(run, "accuracy")


def test_matrix_leaves_out_impossible_combinations(settings):
    keys = settings.matrix()
    assert ("tft-tiny", "cpu", "onnx", "fp32") in keys
    assert ("tft-tiny", "h100", "trt", "fp16") in keys
    assert not [k for k in keys if k[1] == "cpu" and (k[2] == "trt" or k[3] == "fp16")]


@pytest.mark.parametrize(("kind", "missing"), [("binary", "server.binary"),
                                               ("container", "server.image")])
def test_a_server_kind_without_its_location_is_refused(kind, missing):
    with pytest.raises(ConfigError, match=f"server.kind '{kind}' needs {missing}"):
        Settings(main_config(server={"kind": kind}))


def test_a_container_servers_command_names_the_image_gpus_and_workdir(tmp_path, monkeypatch):
    """The container kind starts through the same TritonServer code path: only the argv
    prefix differs (the engine itself is not on this machine)."""
    from deploybench.triton import install
    from deploybench.triton.server import TritonServer

    which = install.shutil.which
    monkeypatch.setattr(install.shutil, "which", lambda name: f"/usr/bin/{name}"
                        if name in ("apptainer", "docker") else which(name))
    container = install.container("docker://img", "apptainer", tmp_path)
    argv = TritonServer(container, tmp_path / "repo", tmp_path / "log")._command()
    assert argv[:5] == ["apptainer", "exec", "--nv", "--bind", str(tmp_path.resolve())]
    assert argv[5:7] == ["docker://img", "/opt/tritonserver/bin/tritonserver"]
    assert f"--model-repository={(tmp_path / 'repo').resolve()}" in argv
    assert "--backend-directory=/opt/tritonserver/backends" in argv
    docker = install.container("img", "docker", tmp_path)
    assert docker.launcher[:2] == ("docker", "run") and "--gpus" in docker.launcher


def test_a_plugin_without_its_framework_names_the_extra(monkeypatch):
    """A TensorFlow plug-in on a PyTorch-only install (no tf extra) says what to install."""
    import importlib

    from deploybench import plugins

    def no_tensorflow(name):
        raise ModuleNotFoundError("No module named 'tensorflow'", name="tensorflow")

    monkeypatch.setattr(importlib, "import_module", no_tensorflow)
    with pytest.raises(ModuleNotFoundError, match=r"'dlrm' needs the 'tensorflow' package.*"
                                                  r"pip install -e '\.\[tf\]'"):
        plugins.load("dlrm")


def test_the_pytorch_path_never_imports_tensorflow():
    """A PyTorch model's steps (every step module, a torch plug-in, its export) run
    without loading TensorFlow: the PyTorch-only install does not pay for the tf extra."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import deploybench.steps.accuracy, deploybench.steps.conversion_check\n"
        "import deploybench.steps.convert, deploybench.steps.export\n"
        "import deploybench.steps.model_repository, deploybench.steps.native\n"
        "import deploybench.steps.performance, deploybench.steps.report\n"
        "import deploybench.sweeps.open_loop, deploybench.steps.search\n"
        "import deploybench.steps.source, deploybench.artifacts, deploybench.serving\n"
        "from deploybench import plugins\n"
        "for name in ('tft', 'bert', 'fastpitch'):\n"
        "    plugins.load(name)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "                ('tensorflow', 'keras', 'tf2onnx'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_config_file_that_is_not_yaml_is_named(tmp_path):
    (tmp_path / "broken.yaml").write_text("plugin: tft\ninputs: [a, b\n")
    with pytest.raises(ConfigError, match=r"(?s)configuration file '.*broken\.yaml' is not "
                                          r"valid YAML: .*line 2, column 9"):
        Settings(main_config(models_dir=str(tmp_path))).check_all([])


@pytest.mark.parametrize(("text", "held"), [("- plugin: tft\n", "holds a list"),
                                            ("", "is empty")])
def test_a_model_config_that_is_not_a_mapping_is_named(tmp_path, text, held):
    (tmp_path / "tft-tiny.yaml").write_text(text)
    with pytest.raises(ConfigError, match=rf"configuration file '.*tft-tiny\.yaml' {held}; a "
                                          "mapping of settings is expected"):
        Settings(main_config(models_dir=str(tmp_path))).check_all([])


def test_the_main_config_files_on_the_command_line_are_checked(tmp_path):
    """What the workflow profiles run before Snakemake reads the --configfile files."""
    from deploybench.settings.config_files import check_command_line

    good, empty, listed = (tmp_path / f"{name}.yaml" for name in ("good", "empty", "list"))
    good.write_text("perf: {attempts: 5}\n")
    empty.write_text("")
    listed.write_text("- perf\n")
    check_command_line(["-n", "--configfile", str(good), "--cores", "2"])
    for argv, said in ((["--configfile", str(good), str(empty), "-n"], f"'{empty}' is empty"),
                       ([f"--configfile={listed}"], f"'{listed}' holds a list"),
                       (["--configfiles", str(tmp_path / "no.yaml")], "does not exist")):
        with pytest.raises(SystemExit) as exited:
            check_command_line(argv)
        assert said in exited.value.code, exited.value.code


def test_equal_server_ports_are_refused_naming_them():
    ports = {"http": 8000, "grpc": 8000, "metrics": 8002}
    with pytest.raises(ConfigError, match="server.ports must be three different ports, given "
                                          "http 8000, grpc 8000, metrics 8002"):
        Settings(main_config(server={"ports": ports}))


def test_config_strings_become_the_numbers_and_booleans_the_schema_wants():
    from deploybench.settings.config import check_main

    config = main_config()
    config["perf"] |= {"attempts": "5", "stability_percentage": "12.5"}
    config["allow_gpu_mismatch"] = "true"
    config["server"]["start_timeout_s"] = "90"
    config["targets"][0]["model"] = "123"  # a string where the schema wants one
    check_main(config)
    assert config["perf"]["attempts"] == 5 and config["perf"]["stability_percentage"] == 12.5
    assert config["allow_gpu_mismatch"] is True and config["server"]["start_timeout_s"] == 90
    assert config["targets"][0]["model"] == "123"
    config["perf"]["max_trials"] = "ten"
    with pytest.raises(ConfigError, match="'perf/max_trials': 'ten' is not of type 'integer'"):
        check_main(config)


def test_every_schema_is_a_valid_json_schema():
    """The validators are built without checking the schemas (start-up time): here they are."""
    import jsonschema

    from deploybench.settings.config import SCHEMA_DIR
    from deploybench.settings.config_files import load_yaml

    for path in sorted(SCHEMA_DIR.glob("*.schema.yaml")):
        schema = load_yaml(path)
        jsonschema.validators.validator_for(schema).check_schema(schema)


def test_cuda_shared_memory_is_refused_on_the_cpu_key(tmp_path):
    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    model["offline"]["shared_memory"] = ["system", "cuda"]
    (tmp_path / "tft-tiny.yaml").write_text(yaml.safe_dump(model))
    settings = Settings(main_config(models_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match="offline.shared_memory 'cuda' of model 'tft-tiny' "
                                          "needs a GPU; GPU key 'cpu' is cpu"):
        settings.run("tft-tiny", "cpu", "ts-trace", "fp32")
    run = settings.run("tft-tiny", "h100", "ts-trace-cg", "fp16")  # dry-runs for a GPU key
    from deploybench.triton import perf_analyzer

    rows = perf_analyzer.sweep(run, "offline")
    assert [(r.batch, r.shared_memory) for r in rows] == [
        (b, mode) for mode in ("system", "cuda") for b in run["model"]["offline"]["batch_sizes"]]


def test_server_settings_take_only_memory_options(tmp_path):
    """triton.server holds memory options only: a flag that would reopen what the pipeline
    restricts (model control, addresses) cannot be written there."""
    model = yaml.safe_load((ROOT / "tests/config/models/tft-tiny.yaml").read_text())
    model["triton"]["server"] = {"model_control_mode": "explicit"}
    (tmp_path / "tft-tiny.yaml").write_text(yaml.safe_dump(model))
    with pytest.raises(ConfigError, match="model_control_mode"):
        Settings(main_config(models_dir=str(tmp_path))).run("tft-tiny", "cpu", "onnx", "fp32")
    model["triton"]["server"] = {"pinned_memory_pool_byte_size": 1 << 20}
    (tmp_path / "tft-tiny.yaml").write_text(yaml.safe_dump(model))
    run = Settings(main_config(models_dir=str(tmp_path))).run("tft-tiny", "cpu", "onnx", "fp32")
    assert step_spec(run, "offline")["model"]["triton"]["server"] == {
        "pinned_memory_pool_byte_size": 1 << 20}  # a measurement re-runs when it changes


def test_backend_overrides_set_one_backends_triton_settings():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    settings = Settings(config)
    trt = settings.run("widedeep", "a100", "trt", "fp16")["model"]["triton"]
    savedmodel = settings.run("widedeep", "a100", "tf-savedmodel", "fp16")["model"]["triton"]
    assert trt["cuda_graphs"] is True and "cuda_graphs" not in savedmodel
    # the device overrides still merge over a backend's (the cpu key's smaller batches)
    assert settings.run("widedeep", "cpu", "onnx", "fp32")["model"]["triton"][
        "max_batch_size"] < trt["max_batch_size"]


def test_a_backend_override_for_a_backend_the_model_lacks_is_named(tmp_path):
    import shutil

    shutil.copytree(ROOT / "config/models", tmp_path, dirs_exist_ok=True)
    path = tmp_path / "fastpitch.yaml"
    path.write_text(path.read_text() + "backend_overrides:\n  tf-trt: {compile_mode: default}\n")
    config = {**yaml.safe_load((ROOT / "config/config.yaml").read_text()),
              "models_dir": str(tmp_path)}
    with pytest.raises(ConfigError, match="unknown backend_overrides key .* 'tf-trt'; valid "
                                          ".*: aoti, onnx, torch-compile, trt"):
        Settings(config).check_all([])


def _bert_with(tmp_path, edit, model="bert"):
    """Settings whose <model>.yaml is edited by `edit` (text in, text out)."""
    import shutil

    shutil.copytree(ROOT / "config/models", tmp_path, dirs_exist_ok=True)
    path = tmp_path / f"{model}.yaml"
    path.write_text(edit(path.read_text()))
    return Settings({**yaml.safe_load((ROOT / "config/config.yaml").read_text()),
                     "models_dir": str(tmp_path)})


def test_per_batch_deployments_are_checked_early(tmp_path):
    settings = _bert_with(tmp_path, lambda text: text.replace(
        "  trt: {triton: {deployments: per_batch}", "  trt: {triton: {deployments: per-batch}"))
    with pytest.raises(ConfigError, match="bert.yaml: invalid value at 'backend_overrides/trt/"
                                          "triton/deployments': 'per-batch' is not one of "
                                          r"\['single', 'per_batch'\]"):
        settings.check_all([])
    settings = _bert_with(tmp_path, lambda text: text.replace("    accuracy: {batch_size: 8}\n",
                                                              ""))
    with pytest.raises(ConfigError, match="model 'bert' on GPU key 'cpu', backend 'onnx': "
                                          "accuracy.batch_size 16 exceeds the largest per-batch "
                                          "deployment .* max batch 8"):
        settings.check_all([])
    settings = _bert_with(tmp_path, lambda text: text + (
        "backend_overrides: {hps-onnx: {triton: {deployments: per_batch}}}\n"), "dlrm")
    # dlrm-large (extends: dlrm) inherits the override, and is checked first
    with pytest.raises(ConfigError, match="model 'dlrm-large': triton.deployments 'per_batch' of "
                                          "backend 'hps-onnx': an ensemble .hps-.. deploys "
                                          "once"):
        settings.check_all([])


def test_the_offline_sweep_measures_each_batch_on_its_own_deployment():
    from deploybench.triton import perf_analyzer

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    run = settings.run("bert", "a30", "trt", "fp16")
    sweep = perf_analyzer.sweep(run, "offline")  # system, then cuda shared memory
    assert [(r.batch, r.model) for r in sweep] == [
        (1, "bert_b1"), (8, "bert_b8"), (16, "bert_b16")] * 2
    assert {r.model for r in perf_analyzer.sweep(run, "online")} == {"bert_b16"}
    ts = settings.run("bert", "a30", "ts-trace", "fp16")
    assert {r.model for r in perf_analyzer.sweep(ts, "offline")} == {"bert"}
