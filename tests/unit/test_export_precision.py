"""A model's export precision: resolved per backend and device, refused where it cannot
serve, and keying the export folders."""

import re

import pytest
import yaml

from deploybench.settings.config import ConfigError
from deploybench.settings.resolve import Settings
from deploybench.settings.step_specs import step_spec
from testkit.workflow import ROOT, main_config


def _bert_tiny_with(tmp_path, **export):
    """Settings whose bert-tiny has `export` settings: top level (`model`), under
    backend_overrides onnx (`onnx`), under device_overrides (`device`: {key: settings})."""
    import shutil

    shutil.copytree(ROOT / "tests/config/models", tmp_path, dirs_exist_ok=True)
    path = tmp_path / "bert-tiny.yaml"
    model = yaml.safe_load(path.read_text())
    if "model" in export:
        model["export"] = {**model["export"], "precision": export["model"]}
    if "onnx" in export:
        model["backend_overrides"]["onnx"]["export"] = {"precision": export["onnx"]}
    for key, value in export.get("device", {}).items():
        model.setdefault("device_overrides", {})[key] = {"export": {"precision": value}}
    path.write_text(yaml.safe_dump(model))
    return Settings(main_config(models_dir=str(tmp_path)))


def test_export_precision_resolves_per_backend_and_device(settings, tmp_path):
    """bert-tiny exports onnx, ort-trt, trt and ts-trace at the run's precision (as its
    reference); an FP32 export is not recorded in the run, so FP32 configurations' settings (and
    what Snakemake compares) are as before the setting existed."""
    fp16 = settings.run("bert-tiny", "h100", "trt", "fp16")
    assert fp16["export_precision"] == "fp16"
    assert step_spec(fp16, "convert")["export_precision"] == "fp16"
    for key in (("bert-tiny", "h100", "trt", "fp32"), ("bert-tiny", "cpu", "onnx", "fp32"),
                ("bert-tiny", "h100", "ts-trace-cg", "fp16"), ("tft-tiny", "h100", "onnx", "fp16")):
        run = settings.run(*key)
        assert "export_precision" not in run and "export_precision" not in step_spec(run, "offline")
    # a GPU key's override over the backend's: fp32 on the a30 only
    local = _bert_tiny_with(tmp_path, device={"a30": "fp32"})
    assert "export_precision" not in local.run("bert-tiny", "a30", "onnx", "fp16")
    assert local.run("bert-tiny", "h100", "onnx", "fp16")["export_precision"] == "fp16"


@pytest.mark.parametrize(("where", "path"), [("model", "export/precision"),
                                            ("onnx", "backend_overrides/onnx/export/precision"),
                                            ("device", "device_overrides/gpu/export/precision")])
def test_a_bad_export_precision_is_refused_naming_the_valid_ones(tmp_path, where, path):
    value = {"device": {"gpu": "bf16"}}.get(where, "bf16")
    with pytest.raises(ConfigError) as err:
        _bert_tiny_with(tmp_path, **{where: value}).models  # noqa: B018 (validates them)
    assert f"invalid value at '{path}': 'bf16' is not one of ['fp32', 'fp16', 'run']" in str(
        err.value)


def test_an_fp16_export_is_refused_where_it_cannot_serve(tmp_path):
    settings = _bert_tiny_with(tmp_path, onnx="fp16", device={"cpu": "fp16"})
    with pytest.raises(ConfigError) as err:  # an FP32 configuration of an FP16-capable key
        settings.run("bert-tiny", "h100", "onnx", "fp32")
    assert ("export.precision 'fp16' of model 'bert-tiny', backend 'onnx' on GPU key 'h100': "
            "an FP16 export cannot serve the FP32 configuration onnx_fp32; use 'run'") in str(
        err.value)
    with pytest.raises(ConfigError, match="GPU key 'cpu' \\(cpu\\) runs no FP16 \\(it runs "
                                          "fp32, int8, int8-weight-only\\), so no "
                                          "configuration of it can serve an FP16 export"):
        settings.run("bert-tiny", "cpu", "ts-script", "fp32")
    # ...also before any job, whatever exists: every model x GPU key x backend is checked
    with pytest.raises(ConfigError, match="GPU key 'cpu' \\(cpu\\) runs no FP16"):
        settings.check_all([])
    # a format without FP16 export (torch.export's program: cast on the device)
    formats = _bert_tiny_with(tmp_path, model="run")
    with pytest.raises(ConfigError, match="the format 'torch-export' is exported in FP32 only "
                                          "\\(FP16 exports: onnx, ts-trace, ts-script\\)"):
        formats.run("bert-tiny", "h100", "aoti", "fp16")
    with pytest.raises(ConfigError, match="backend 'aoti' on GPU key 'a30'"):
        formats.check_all([])


def test_export_folders_are_keyed_by_precision():
    from deploybench.records import layout

    assert layout.export("onnx", "model.onnx") == "results/{model}/export/onnx/model.onnx"
    assert (layout.export("onnx", "model.onnx", "fp16")
            == "results/{model}/export/onnx-fp16/model.onnx")
    for fmt in ("onnx", "ts-trace", "dense-onnx", "torch-export"):
        for precision in ("fp32", "fp16"):
            folder = layout.export_folder(fmt, precision)
            assert layout.export_of(folder) == (fmt, precision)
    pattern = layout.export_folders(("onnx", "ts-trace", "dense-onnx"))
    assert all(re.fullmatch(pattern, f) for f in ("onnx", "onnx-fp16", "ts-trace-fp16",
                                                   "dense-onnx"))
    assert not any(re.fullmatch(pattern, f) for f in ("onnx-fp8", "tf-savedmodel", "sparse"))
