"""What jobs ask a cluster scheduler for: the resources of deploybench.settings.cluster, from the
GPU registry and the config's `cluster` section, as the rules' dry-run shows them."""

import pytest
import yaml

from deploybench.settings.cluster import DEVICE_GROUP, job_resources
from deploybench.settings.resolve import Settings
from testkit.workflow import ROOT, main_config, measuring_rules

CLUSTER = main_config()["cluster"]


def resources(settings, step, gpu=None, backend="onnx", precision="fp32", cluster=CLUSTER):
    run = settings.run("tft-tiny", gpu, backend, precision) if gpu else None
    return {k: v for k, v in job_resources(cluster, settings.gpus, step, run).items()
            if v is not None}


def test_a_device_step_on_a_gpu_key_asks_for_one_gpu_of_its_type(settings):
    device = CLUSTER["resources"]["device"]
    for step in ("conversion_check", "accuracy", "offline", "online", "native"):
        assert resources(settings, step, "a30") == {
            "slurm_partition": "a30", "gpu": 1, "gpu_model": "a30", "gpu_manufacturer": "nvidia",
            **device}
    assert resources(settings, "offline", "t4")["machine_type"] == "g4dn.xlarge"
    # Conversion is on the device only when it builds TensorRT or casts to FP16.
    assert resources(settings, "convert", "t4", "trt", "fp16")["gpu_model"] == "t4"
    assert resources(settings, "convert", "t4", "ts-trace", "fp16")["gpu"] == 1
    assert "gpu" not in resources(settings, "convert", "t4", "onnx", "fp32")


@pytest.mark.parametrize("step", ["weights", "export", "model_repository", "plots",
                                  "configuration_report"])
def test_jobs_without_a_device_ask_for_no_gpu(settings, step):
    assert resources(settings, step) == CLUSTER["resources"]["default"]
    assert resources(settings, step, "a30") == CLUSTER["resources"]["default"]


def test_the_cpu_key_and_stand_ins_ask_for_no_gpu(settings):
    assert resources(settings, "accuracy", "cpu") == CLUSTER["resources"]["device"]
    stand_in = {**CLUSTER, "request_gpus": False}
    assert resources(settings, "accuracy", "a30", cluster=stand_in) == {
        "slurm_partition": "a30", **CLUSTER["resources"]["device"]}


def test_placement_is_not_a_setting_of_any_step(tmp_path):
    """Editing where a key runs (registry slurm/kubernetes) re-runs nothing."""
    a = Settings(main_config()).run("tft-tiny", "a30", "onnx", "fp32")
    registry = tmp_path / "gpus.yaml"
    registry.write_text(
        (Settings(main_config()).root / "config/gpus.yaml").read_text()
        .replace("partition: a30", "partition: gpu-a30"))
    b = Settings(main_config(gpu_registry=str(registry))).run("tft-tiny", "a30", "onnx", "fp32")
    assert a == b and "slurm" not in a["gpu"]


@pytest.mark.parametrize("profile", ["slurm", "kubernetes"])
def test_the_cluster_profiles_run_a_configurations_measuring_steps_as_one_job(profile):
    """The profiles name the rules' group (DEVICE_GROUP), join its three parts, and scope
    bench_slot to the group job, so that its steps take turns on the job's one GPU."""
    settings = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
    assert settings["group-components"] == [f"{DEVICE_GROUP}=3"]
    assert settings["resources"] == ["bench_slot=1"]
    assert settings["set-resource-scopes"] == ["bench_slot=local"]
    assert measuring_rules() == {"accuracy", "offline", "online", "rate", "floor", "native",
                                 "search_point"}
