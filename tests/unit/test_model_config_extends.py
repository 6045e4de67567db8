"""A model config that extends another: only what differs."""

import pytest
import yaml

from deploybench.settings.config import ConfigError
from deploybench.settings.resolve import Settings
from testkit.workflow import ROOT, main_config


def test_a_model_extends_another_with_only_what_differs(tmp_path):
    """`extends: <model>`: the base's settings with this file's deep-merged over them
    (lists replaced whole); an unknown base and a cycle are refused by name."""
    import shutil

    shutil.copy(ROOT / "tests/config/models/dlrm-tiny.yaml", tmp_path)
    (tmp_path / "dlrm-big.yaml").write_text(
        "extends: dlrm-tiny\ntitle: DLRM tiny, larger tables\nbackends: [hps-onnx]\n"
        "hparams: {max_table_size: 5000}\ndevice_overrides: {cpu: {offline: {batch_sizes: [8]}}}\n")
    settings = Settings(main_config(models_dir=str(tmp_path)))
    base, big = settings.models["dlrm-tiny"], settings.models["dlrm-big"]
    assert big["title"] == "DLRM tiny, larger tables" and big["backends"] == ["hps-onnx"]
    assert big["hparams"] == {**base["hparams"], "max_table_size": 5000}
    assert big["hparams"]["cardinalities"] == base["hparams"]["cardinalities"]
    assert big["plugin"] == base["plugin"] and big["inputs"] == base["inputs"]
    run = settings.run("dlrm-big", "cpu", "hps-onnx", "fp32")
    assert run["model"]["offline"]["batch_sizes"] == [8]
    assert (run["model"]["offline"]["measurement_request_count"]
            == settings.run("dlrm-tiny", "cpu", "hps-onnx", "fp32")["model"]["offline"][
                "measurement_request_count"])
    with pytest.raises(ConfigError, match="backend 'onnx' is not configured for model "
                                          "'dlrm-big'; its backends: hps-onnx"):
        settings.check_key("dlrm-big", "cpu", "onnx", "fp32")

    (tmp_path / "dlrm-big.yaml").write_text("extends: dlrm-tinny\n")
    with pytest.raises(ConfigError, match="model config 'dlrm-big' extends 'dlrm-tinny', "
                                          "which is not a model; models: dlrm-big, dlrm-tiny"):
        Settings(main_config(models_dir=str(tmp_path))).check_all([])
    (tmp_path / "dlrm-big.yaml").write_text("extends: dlrm-loop\n")
    (tmp_path / "dlrm-loop.yaml").write_text("extends: dlrm-big\n")
    with pytest.raises(ConfigError, match="model configs extend each other in a cycle: "
                                          "dlrm-big -> dlrm-loop -> dlrm-big"):
        Settings(main_config(models_dir=str(tmp_path))).check_all([])


def test_dlrm_large_is_dlrm_with_tables_ten_times_a_larger_cache():
    """The configured dlrm-large: dlrm's network, data and run parameters, tables up to 1M
    rows (GiB, where dlrm's are MiB), the ensemble backends only, the reference's request
    samples."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    settings = Settings(config)
    dlrm, large = settings.models["dlrm"], settings.models["dlrm-large"]
    assert large["backends"] == [b for b in dlrm["backends"] if b.startswith("hps-")]
    assert {k: v for k, v in large["hparams"].items() if k != "max_table_size"} == {
        k: v for k, v in dlrm["hparams"].items() if k != "max_table_size"}
    from deploybench.models.dlrm.features import table_sizes

    rows = sum(table_sizes(large["hparams"]))
    assert rows * 128 * 4 > 3 * 2**30 > 10 * sum(table_sizes(dlrm["hparams"])) * 128 * 4
    # the offline requests made of the reference's 262,144 samples on every key
    assert large["ensemble"] == {**dlrm["ensemble"], "perf_samples": 262144}
    assert large["offline"] == dlrm["offline"]
    assert large["reference"]["pairs"] == dlrm["reference"]["pairs"]
