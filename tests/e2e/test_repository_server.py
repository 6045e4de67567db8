"""Generated configs the real Triton server accepts, and a config checked against its ONNX
graph by the server."""

import re

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from deploybench.settings.resolve import Settings
from deploybench.triton import config as triton_config
from deploybench.triton import repository, signature
from testkit.repository import NGC_SERVER
from testkit.workflow import main_config, snakemake

FRAMEWORK_FORMATS = {"onnx": "model.onnx", "trt": "model.plan", "ts-trace": "model.pt",
                     "tf-savedmodel": "model.savedmodel"}


def test_the_real_server_accepts_every_framework_backend_config(settings, tmp_path):
    """Each config of a framework backend, loaded by the real Triton core: the embedded
    server has none of those backends, so each model must fail on the missing backend,
    after its config passed Triton's own validation (a config error would say so)."""
    from deploybench.triton import install
    from deploybench.triton.server import ServerError, TritonServer

    repo = tmp_path / "repo"
    names = []
    for model in settings.models:
        for backend, artifact in FRAMEWORK_FORMATS.items():
            if backend not in settings.models[model]["backends"]:
                continue
            run = settings.run(model, "h100", backend, "fp32")
            name = f"{model}-{backend}"
            config = triton_config.model_config(name, run, run["backend"]["triton_backend"])
            (repo / name / "1" / artifact).parent.mkdir(parents=True)
            (repo / name / "1" / artifact).write_bytes(b"")
            triton_config.write(config, repo / name / "config.pbtxt")
            names.append((name, run["backend"]["triton_backend"]))
    assert len(names) >= 10
    # a config Triton's validation refuses, to show the check tells the two apart
    broken = triton_config.read(repo / names[0][0] / "config.pbtxt")
    broken.name = "broken"
    broken.dynamic_batching.preferred_batch_size[:] = [broken.max_batch_size + 1]
    (repo / "broken" / "1").mkdir(parents=True)
    triton_config.write(broken, repo / "broken" / "config.pbtxt")
    with pytest.raises(ServerError) as failed:
        with TritonServer(install.prepare(), repo, tmp_path / "server.log"):
            pass
    log = (tmp_path / "server.log").read_text()
    for name, backend in names:
        assert f"Poll failed for model directory '{name}'" not in log  # the config is valid
        (reason,) = re.findall(rf"failed to load '{re.escape(name)}' version 1: (.*)", log)
        assert f"unable to find backend library for backend '{backend}'" in reason, reason
    (reason,) = re.findall(r"Poll failed for model directory 'broken': (.*)", log)
    assert "preferred size must be <= max batch size" in reason, reason
    assert "exit code 1" in str(failed.value)


def test_a_config_is_checked_against_its_onnx_graph(tmp_path):
    """Check 9, as Triton's onnxruntime backend checks a model when it loads it: BERT's
    FP16 ONNX export gives FP16 outputs, so the configured FP32 (what the repository step
    declared before) is refused by name; the framework config now declares what the graph
    gives, while our runners, which cast, serve the configured FP32; a tensor the graph
    lacks is refused for both."""
    export = "results/bert-tiny/export/onnx-fp16/model.onnx"
    snakemake(tmp_path, export)
    artifact = tmp_path / export
    run = Settings(main_config()).run("bert-tiny", "h100", "onnx", "fp16")
    configured = triton_config.model_config("bert-tiny", run, "onnxruntime")
    with pytest.raises(ValueError, match=r"output 'output__0' is FP16 in the artifact, the "
                                         r"config declares FP32; output 'output__1' is FP16"):
        signature.check(configured, artifact, "onnxruntime", served_by_us=False)
    signature.check(configured, artifact, "python", served_by_us=True)
    assert repository.create(run, artifact, tmp_path / "repo", NGC_SERVER) == "onnxruntime"
    written = triton_config.read(tmp_path / "repo" / "bert-tiny_b1" / "config.pbtxt")
    assert [(o.name, o.data_type) for o in written.output] == \
        [("output__0", mc.TYPE_FP16), ("output__1", mc.TYPE_FP16)]
    assert [i.data_type for i in written.input] == [mc.TYPE_INT32] * 3
    renamed = mc.ModelConfig()
    renamed.CopyFrom(written)
    renamed.output[0].name = "start_logits"
    renamed.input[0].dims[0] = 128
    for served_by_us in (False, True):
        with pytest.raises(ValueError, match=r"input 'input__0' has dims \[-1, 64\] in the "
                                             r"artifact, the config declares \[-1, 128\]; "
                                             r"output 'start_logits' is not in the artifact "
                                             r"\(it has: output__0, output__1\)"):
            signature.check(renamed, artifact, "onnxruntime", served_by_us)
