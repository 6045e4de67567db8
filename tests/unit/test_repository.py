"""Generated Triton model configs, python-backend and framework-backend, for every model ×
format, parsed back with Triton's own ModelConfig protobuf."""

import onnx
import pytest
import yaml
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2 as mc

from deploybench.backends import BACKENDS, is_ensemble
from deploybench.settings.resolve import Settings
from deploybench.triton import config as triton_config
from deploybench.triton import cpp_backend, repository, signature
from testkit.repository import NGC_SERVER
from testkit.tensorrt_stand_in import StandInTensorRT, stand_in_plan
from testkit.workflow import ROOT

EMBEDDED = ["deploybench", "python"]  # the embedded server's, with the C++ backend built
PLATFORMS = {"tensorrt": "tensorrt_plan", "tensorflow": "tensorflow_savedmodel"}


def every_run(settings: Settings):
    for model in settings.models:
        for backend in settings.models[model]["backends"]:
            for gpu, precision in (("h100", "fp32"), ("h100", "fp16"), ("cpu", "fp32")):
                if gpu in settings.gpus:
                    try:
                        yield settings.run(model, gpu, backend, precision)
                    except Exception as err:  # impossible keys (TensorRT on cpu) are refused
                        assert "needs an NVIDIA GPU" in str(err)


@pytest.fixture(scope="module", params=["reference", "tests"])
def all_settings(request):
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    if request.param == "tests":
        config["models_dir"] = "tests/config/models"
    return Settings(config)


def test_every_config_parses_back_with_the_protobuf(all_settings, tmp_path):
    seen = set()
    for run in every_run(all_settings):
        key = run["key"]
        if is_ensemble(run):  # ensembles: tests/unit/test_ensemble.py
            continue
        for available in (["python"], NGC_SERVER, EMBEDDED):
            try:
                backend = repository.choose_backend(run, available)
                config = triton_config.model_config(key["model"], run, backend)
            except ValueError as err:  # FP16 TorchScript with FP32 inputs in pytorch, an
                # AOTInductor package above batch 1 there (platform torch_aoti)
                assert "use server.serve_with: python" in str(err)
                continue
            path = tmp_path / "config.pbtxt"
            triton_config.write(config, path)
            parsed = triton_config.read(path)
            assert parsed == config
            assert parsed.max_batch_size == run["model"]["triton"]["max_batch_size"]
            kind = parsed.instance_group[0].kind
            assert kind == (mc.ModelInstanceGroup.KIND_GPU if run["gpu"]["kind"] == "gpu"
                            else mc.ModelInstanceGroup.KIND_CPU)
            assert [t.name for t in parsed.output] == [t["name"] for t in run["model"]["outputs"]]
            seen.add((key["backend"], parsed.backend or parsed.platform))
    backends = {b for m in all_settings.models.values() for b in m["backends"]
                if not BACKENDS[b].dense}
    expected = {(b, "python") for b in backends}
    # every model batches, which torch_aoti (aoti in the pytorch backend) does not complete
    expected |= {(b, PLATFORMS.get(BACKENDS[b].triton_backend, BACKENDS[b].triton_backend))
                 for b in backends if BACKENDS[b].triton_backend and b != "aoti"}
    expected |= {(b, "deploybench") for b in backends
                 if BACKENDS[b].runner in cpp_backend.RUNNERS}
    assert seen == expected


def test_framework_backend_configs_carry_what_their_backend_needs(settings):
    run = settings.run("bert-tiny", "h100", "ort-trt", "fp16")
    config = triton_config.model_config("bert", run, repository.choose_backend(run, NGC_SERVER))
    assert config.backend == "onnxruntime" and config.default_model_filename == "model.onnx"
    (accel,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accel.name == "tensorrt" and accel.parameters["precision_mode"] == "FP16"

    run = settings.run("bert-tiny", "h100", "trt", "fp16")
    config = triton_config.model_config("bert", run, repository.choose_backend(run, NGC_SERVER))
    assert config.platform == "tensorrt_plan" and config.default_model_filename == "model.plan"

    run = settings.run("bert-tiny", "h100", "ts-trace", "fp16")
    config = triton_config.model_config("bert", run, "pytorch")
    assert config.backend == "pytorch"  # int32 inputs as declared, FP16 logits out
    assert {t.data_type for t in config.output} == {mc.TYPE_FP16}
    with pytest.raises(ValueError, match="FP32 inputs .*s_cont__1"):
        triton_config.model_config("tft", settings.run("tft-tiny", "h100", "ts-trace", "fp16"),
                                "pytorch")


def test_which_backend_serves(settings):
    onnx_run = settings.run("tft-tiny", "cpu", "onnx", "fp32")
    assert repository.choose_backend(onnx_run, ["python"]) == "python"  # the embedded server
    assert repository.choose_backend(onnx_run, NGC_SERVER) == "onnxruntime"
    python_only = {**onnx_run, "server": {**onnx_run["server"], "serve_with": "python"}}
    assert repository.choose_backend(python_only, NGC_SERVER) == "python"
    framework_only = {**onnx_run, "server": {**onnx_run["server"], "serve_with": "framework"}}
    with pytest.raises(ValueError, match="has no 'onnxruntime' backend .it has: python"):
        repository.choose_backend(framework_only, ["python"])
    cg = {**settings.run("tft-tiny", "h100", "ts-trace-cg", "fp16"),
          "server": framework_only["server"]}
    with pytest.raises(ValueError, match="'ts-trace-cg' has no framework backend"):
        repository.choose_backend(cg, NGC_SERVER)


def test_which_backend_serves_the_torch_formats(settings):
    """The pipeline's C++ backend serves the PyTorch formats and ONNX wherever the server has
    it (auto), the python backend or the format's own where told to; it is refused, with
    why, for a format it does not serve or a server without it."""
    embedded = ["deploybench", "python"]
    for backend in ("ts-trace", "ts-script", "aoti"):
        run = settings.run("tft-tiny", "cpu", backend, "fp32")
        assert repository.choose_backend(run, embedded) == "deploybench"
        assert repository.choose_backend(run, [*NGC_SERVER, "deploybench"]) == "deploybench"
        assert repository.choose_backend(run, ["python"]) == "python"  # where it is not built
    for backend in ("ts-trace-cg", "aoti-cg"):
        assert repository.choose_backend(settings.run("tft-tiny", "h100", backend, "fp16"),
                                         embedded) == "deploybench"
    run = settings.run("tft-tiny", "cpu", "ts-trace", "fp32")
    told = {**run, "server": {**run["server"], "serve_with": "python"}}
    assert repository.choose_backend(told, embedded) == "python"
    told = {**run, "server": {**run["server"], "serve_with": "deploybench"}}
    with pytest.raises(ValueError, match="has no 'deploybench' backend .it has: python; the "
                                         "install records why"):
        repository.choose_backend(told, ["python"])
    compiled = {**settings.run("tft-tiny", "cpu", "torch-compile", "fp32"),
                "server": told["server"]}
    with pytest.raises(ValueError, match="it does not serve backend 'torch-compile' .it serves "
                                         "the runners onnxruntime, torch, torch-cudagraph, aoti"):
        repository.choose_backend(compiled, embedded)
    assert repository.choose_backend({**compiled, "server": run["server"]}, embedded) == \
        "python"
    # ONNX in its ONNX Runtime engine, as the torch formats in libtorch
    onnx = settings.run("tft-tiny", "cpu", "onnx", "fp32")
    assert repository.choose_backend(onnx, embedded) == "deploybench"
    assert repository.choose_backend(onnx, ["python"]) == "python"


def test_aoti_on_a_full_triton_is_torch_aoti_or_refused_with_the_reason(settings):
    """Triton 26.03 and later serve an AOTInductor package in their pytorch backend
    (platform torch_aoti), a beta whose README says batches above 1 are not complete."""
    run = settings.run("tft-tiny", "cpu", "aoti", "fp32")
    assert repository.choose_backend(run, NGC_SERVER) == "pytorch"
    with pytest.raises(ValueError, match=r"platform torch_aoti, 26.03 and later\) as a beta "
                                         r"whose README says batch sizes above 1 are not "
                                         r"complete; 'tft-tiny' batches up to 8"):
        triton_config.model_config("tft-tiny", run, "pytorch")
    single = {**run, "model": {**run["model"], "triton": {
        **run["model"]["triton"], "max_batch_size": 1, "preferred_batch_sizes": [1]}}}
    config = triton_config.model_config("tft-tiny", single, "pytorch")
    assert (config.platform, config.backend, config.default_model_filename) == \
        ("torch_aoti", "", "model.pt2")


def test_onnxruntime_config_lists_only_the_graph_inputs(settings, tmp_path):
    """An exported ONNX graph drops the inputs the model never reads; Triton's onnxruntime
    backend refuses a config that lists them, so its config leaves them out (the python
    one not)."""
    run = settings.run("tft-tiny", "cpu", "onnx", "fp32")
    kept = ["s_cat__0", "k_cont__3"]
    specs = {t["name"]: t for t in run["model"]["inputs"]}
    types = {"INT64": TensorProto.INT64, "FP32": TensorProto.FLOAT}
    graph = helper.make_graph(
        [helper.make_node("Identity", ["k_cont__3"], ["target__0"])], "g",
        [helper.make_tensor_value_info(n, types[specs[n]["dtype"]], ["b", *specs[n]["dims"]])
         for n in kept],
        [helper.make_tensor_value_info("target__0", TensorProto.FLOAT, None)])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), path)
    framework = triton_config.model_config("tft", run, "onnxruntime", path)
    assert [t.name for t in framework.input] == kept
    python = triton_config.model_config("tft", run, "python", path)
    assert len(python.input) == len(run["model"]["inputs"])


# The keys whose runners compile or capture CUDA graphs on a batch bucket's first call.
WARM_KEYS = {"ts-trace-cg", "aoti-cg", "torch-compile"}


def _with_batch(run: dict, max_batch: int, dims: list | None = None) -> dict:
    """The run at another max batch size (and its first input's dims)."""
    model = {**run["model"], "triton": {**run["model"]["triton"], "max_batch_size": max_batch,
                                        "preferred_batch_sizes": [max(max_batch, 1)]}}
    if dims is not None:
        model["inputs"] = [{**model["inputs"][0], "dims": dims}, *model["inputs"][1:]]
    return {**run, "model": model}


@pytest.mark.parametrize("max_batch, batches", [(8, [1, 2, 4, 8]), (12, [1, 2, 4, 8, 12]),
                                                (1, [1]), (0, [1])])
def test_keys_that_compile_or_capture_warm_up_every_bucket_at_load(settings, tmp_path,
                                                                   max_batch, batches):
    """Triton's model_warmup in the config of a key whose runner compiles or records CUDA
    graphs on a bucket's first call: zeros of every input at each power-of-two bucket and
    the max batch size (a model without a batch dimension: batch 1, Triton's rule), for
    every backend that serves it; none for the other keys, none with a variable dim."""
    assert {k for k, b in BACKENDS.items()
            if triton_config.compiles_on_first_calls(b.runner)} == WARM_KEYS
    path = tmp_path / "config.pbtxt"
    for backend in (*sorted(WARM_KEYS), "ts-trace", "onnx"):
        run = _with_batch(settings.run("tft-tiny", "h100", backend, "fp32"), max_batch)
        want = {t["name"]: (mc.DataType.Value(f"TYPE_{t['dtype']}"), t["dims"])
                for t in run["model"]["inputs"]}
        for available in (["python"], EMBEDDED, NGC_SERVER):
            served = repository.choose_backend(run, available)
            triton_config.write(triton_config.model_config("tft", run, served), path)
            config = triton_config.read(path)
            if backend not in WARM_KEYS:
                assert not config.model_warmup, (backend, served)
                continue
            assert [(w.name, w.batch_size, w.count) for w in config.model_warmup] == \
                [(f"batch_{b}", b, 0) for b in batches], (backend, served)
            for sample in config.model_warmup:
                assert {n: (i.data_type, list(i.dims)) for n, i in sample.inputs.items()} \
                    == want
                assert all(i.zero_data for i in sample.inputs.values())
    variable = _with_batch(settings.run("tft-tiny", "h100", "ts-trace-cg", "fp32"), 8,
                           dims=[-1, 1])
    assert not triton_config.model_config("tft", variable, "python").model_warmup


# Reference 004's runner (DLE BERT dist4l runner/config_<GPU>.yaml): ONNX, ONNX + TensorRT and
# TensorRT deployed once per batch size, max batch size N -> the preferred batch sizes.
REFERENCE_PER_BATCH = {1: [1], 8: [4, 8], 16: [8, 16]}


def _bert_onnx(path, run):
    """An ONNX graph with BERT's tensors (what the onnxruntime config reads)."""
    ids = [helper.make_tensor_value_info(t["name"], TensorProto.INT32, ["b", *t["dims"]])
           for t in run["model"]["inputs"]]
    outs = [helper.make_tensor_value_info(t["name"], TensorProto.FLOAT, ["b", *t["dims"]])
            for t in run["model"]["outputs"]]
    nodes = [helper.make_node("Cast", ["input__0"], [o.name], to=TensorProto.FLOAT)
             for o in outs]
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", ids, outs)), path)


@pytest.mark.parametrize("backend, server", [("onnx", ["onnxruntime"]),
                                             ("ort-trt", ["onnxruntime"]),
                                             ("trt", ["tensorrt"]), ("trt", ["python"])])
def test_per_batch_backends_deploy_once_per_batch_as_the_reference(backend, server, tmp_path,
                                                                  monkeypatch):
    import sys

    from deploybench.runners.tensorrt import profiles
    from deploybench.single import options

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    run = settings.run("bert", "a30", backend, "fp16")
    artifact = tmp_path / run["artifact"]
    if server == ["tensorrt"]:  # its config follows the plan's bindings: a stand-in's
        monkeypatch.setitem(sys.modules, "tensorrt", StandInTensorRT)
        stand_in_plan(artifact, run["model"]["inputs"], run["model"]["outputs"], "HALF")
    else:
        _bert_onnx(artifact, run)  # the python backend's runner reads a plan itself
    served = repository.create(run, artifact, tmp_path / "repo", server)
    assert served == server[0]
    configs = {p.parent.name: triton_config.read(p)
               for p in (tmp_path / "repo").glob("*/config.pbtxt")}
    assert sorted(configs) == ["bert_b1", "bert_b16", "bert_b8"]
    for batch, preferred in REFERENCE_PER_BATCH.items():
        config = configs[f"bert_b{batch}"]
        assert config.name == f"bert_b{batch}" and config.max_batch_size == batch
        assert list(config.dynamic_batching.preferred_batch_size) == preferred
        assert config.dynamic_batching.max_queue_delay_microseconds == 1
        assert [g.count for g in config.instance_group] == [1]
        # the plan's profile fixed at this deployment's batch (Triton's tensorrt backend)
        profile = [str(list(REFERENCE_PER_BATCH).index(batch))] if served == "tensorrt" else []
        assert list(config.instance_group[0].profile) == profile
        if served == "onnxruntime" and backend == "ort-trt":
            (accel,) = config.optimization.execution_accelerators.gpu_execution_accelerator
            assert accel.parameters["precision_mode"] == "FP16"
    # one artifact, hard-linked into every deployment
    inodes = {(tmp_path / "repo" / name / "1" / run["artifact"]).stat().st_ino
              for name in configs}
    assert len(inodes) == 1
    # the TensorRT build: one profile per deployment, min = opt = max (the reference's
    # --min-shapes/--opt-shapes/--max-shapes input__i=N,384), the reference's 8 GiB workspace
    opts = options(run)
    assert profiles(opts) == [(1, 1, 1), (8, 8, 8), (16, 16, 16)]
    assert opts.input_dims == ((384,),) * 3 and opts.workspace_mb << 20 == 8589934592


def test_torchscript_deploys_once_with_max_batch_16_as_the_reference(tmp_path):
    from deploybench.runners.tensorrt import profiles
    from deploybench.single import options

    settings = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text()))
    run = settings.run("bert", "a30", "ts-trace", "fp16")
    artifact = tmp_path / run["artifact"]
    artifact.write_bytes(b"stand-in")
    repository.create(run, artifact, tmp_path / "repo", ["python"])
    (path,) = (tmp_path / "repo").glob("*/config.pbtxt")
    config = triton_config.read(path)
    assert config.name == "bert" and config.max_batch_size == 16
    assert list(config.dynamic_batching.preferred_batch_size) == [8, 16]
    assert profiles(options(run)) == [(1, 16, 16)]  # unchanged where not per batch


def test_a_tensorrt_config_declares_what_its_plan_gives_and_a_mismatch_is_refused(
        tmp_path, monkeypatch):
    """BERT trt_fp16: TensorRT builds its plan from the FP16 ONNX export, so the plan's
    outputs are FP16 and Triton's tensorrt backend refuses a config declaring FP32 at load.
    The config follows the plan (an FP32 plan: FP32), and the check refuses the mismatch by
    name before any server does."""
    import json
    import sys

    monkeypatch.setitem(sys.modules, "tensorrt", StandInTensorRT)
    run = Settings(yaml.safe_load((ROOT / "config/config.yaml").read_text())).run(
        "bert", "h100", "trt", "fp16")
    seq = run["model"]["inputs"][0]["dims"][0]
    artifact = tmp_path / "model.plan"

    def plan(output_type: str) -> None:
        stand_in_plan(artifact, run["model"]["inputs"], run["model"]["outputs"], output_type)

    plan("HALF")
    config = triton_config.model_config("bert", run, "tensorrt", artifact)
    assert [(o.name, o.data_type) for o in config.output] == \
        [("output__0", mc.TYPE_FP16), ("output__1", mc.TYPE_FP16)]
    assert [i.data_type for i in config.input] == [mc.TYPE_INT32] * 3
    signature.check(config, artifact, "tensorrt", served_by_us=False)
    declared_fp32 = triton_config.model_config("bert", run, "tensorrt")  # as it was
    with pytest.raises(ValueError, match=r"output 'output__0' is FP16 in the artifact, the "
                                         r"config declares FP32; output 'output__1' is FP16"):
        signature.check(declared_fp32, artifact, "tensorrt", served_by_us=False)
    assert repository.create(run, artifact, tmp_path / "repo", NGC_SERVER) == "tensorrt"
    written = sorted((tmp_path / "repo").glob("*/config.pbtxt"))
    assert len(written) == len(run["model"]["offline"]["batch_sizes"])  # one a batch size
    for path in written:
        assert {o.data_type for o in triton_config.read(path).output} == {mc.TYPE_FP16}
    plan("FLOAT")  # an FP32 plan: FP32 declared, and the FP16 config refused
    assert {o.data_type for o in triton_config.model_config(
        "bert", run, "tensorrt", artifact).output} == {mc.TYPE_FP32}
    with pytest.raises(ValueError, match=r"output 'output__0' is FP32 in the artifact, the "
                                         r"config declares FP16"):
        signature.check(config, artifact, "tensorrt", served_by_us=False)
    artifact.write_text(json.dumps({"input__0": ["INPUT", "HALF", [-1, seq]],
                                    "output__0": ["OUTPUT", "HALF", [-1, seq]]}))
    with pytest.raises(ValueError, match=r"tensorrt backend cannot serve the TensorRT plan of "
                                         r"'bert' as it is: it takes input__0 as FP16"):
        triton_config.model_config("bert", run, "tensorrt", artifact)
