"""The BERT plug-in: DLE's BertForQuestionAnswering layout and checkpoints, the SQuAD v1.1
data (generator, run_squad features with doc stride), answer decoding and the official
v1.1 metric, and the network's exports (TorchScript trace and script, ONNX int32)."""

import copy
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from deploybench.models import bert
from testkit.bert import (
    TINY,
    data,  # noqa: F401 (a fixture)
)
from testkit.workflow import reference_opset

# DLE's distilled 4L-288D student with run_squad's settings (config/models/bert.yaml)
REFERENCE = {**TINY, "vocab_size": 30522, "hidden_size": 288, "num_hidden_layers": 4,
             "num_attention_heads": 12, "intermediate_size": 1152,
             "max_position_embeddings": 512, "max_seq_length": 384, "doc_stride": 128,
             "max_query_length": 64}
NAMES = ["input__0", "input__1", "input__2"]


def dle_keys(layers, pooler):
    """The state_dict keys of DLE's BertForQuestionAnswering (modeling.py)."""
    keys = [f"bert.embeddings.{e}.weight" for e in ("word_embeddings", "position_embeddings",
                                                     "token_type_embeddings")]
    keys += ["bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias"]
    for n in range(layers):
        for module in ("attention.self.query", "attention.self.key", "attention.self.value",
                       "attention.output.dense", "attention.output.LayerNorm",
                       "intermediate.dense_act", "output.dense", "output.LayerNorm"):
            keys += [f"bert.encoder.layer.{n}.{module}.{p}" for p in ("weight", "bias")]
    if pooler:
        keys += ["bert.pooler.dense_act.weight", "bert.pooler.dense_act.bias"]
    return keys + ["qa_outputs.weight", "qa_outputs.bias"]


def test_state_dict_has_dle_layout_and_bert_init():
    model = bert.build_model(REFERENCE, None, seed=0)
    state = model.state_dict()
    assert list(state) == dle_keys(4, pooler=False)
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    assert shapes["bert.embeddings.word_embeddings.weight"] == (30528, 288)  # padded to 8
    assert shapes["bert.embeddings.position_embeddings.weight"] == (512, 288)
    assert shapes["bert.encoder.layer.3.intermediate.dense_act.weight"] == (1152, 288)
    assert shapes["bert.encoder.layer.3.output.dense.weight"] == (288, 1152)
    assert shapes["qa_outputs.weight"] == (2, 288)
    # BERT's init: normal(0, 0.02) weights, zero biases, unit LayerNorm
    query = state["bert.encoder.layer.0.attention.self.query.weight"]
    assert query.std().item() == pytest.approx(0.02, rel=0.05)
    assert not state["bert.encoder.layer.0.attention.self.query.bias"].any()
    assert (state["bert.embeddings.LayerNorm.weight"] == 1).all()
    assert not model.training
    with torch.no_grad():
        start, end = model(*(torch.ones(2, 384, dtype=torch.int32),) * 3)
    assert start.shape == end.shape == (2, 384) and start.dtype == torch.float32


def test_seeded_build_is_deterministic():
    a, b, c = (bert.build_model(TINY, None, seed) for seed in (7, 7, 8))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(),
                                                 b.state_dict().values()))
    assert not torch.equal(a.state_dict()["qa_outputs.weight"],
                           c.state_dict()["qa_outputs.weight"])


def test_exports_reproduce_the_model(data, tmp_path):
    inputs, _ = bert.load_split(TINY, str(data), "dev", max_samples=12)
    model = bert.build_model(TINY, None, seed=0)
    x = tuple(torch.from_numpy(a) for a in inputs)
    example = tuple(t[:2] for t in x)  # exported at batch 2, run at batch 12
    with torch.no_grad():
        expected = model(*x)
        # the mask matters: padding is not attended
        masked = model(x[0], x[1], torch.ones_like(x[2]))
        assert not torch.allclose(masked[0], expected[0])
        for exported in (torch.jit.trace(model, example), torch.jit.script(model)):
            got = exported(*x)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e, rtol=0, atol=1e-5)
        torch.onnx.export(model, example, str(tmp_path / "m.onnx"), input_names=NAMES,
                          output_names=["output__0", "output__1"],
                          opset_version=reference_opset("bert"), dynamo=False,
                          dynamic_axes={n: {0: "batch"} for n in [*NAMES, "output__0",
                                                                  "output__1"]})
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [(n, "tensor(int32)")
                                                                for n in NAMES]
    got = session.run(None, dict(zip(NAMES, inputs)))
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e.numpy(), rtol=0, atol=1e-5)


def test_erf_gelu_is_the_default_and_tanh_is_close():
    erf = bert.build_model({**TINY, "gelu_approximate": "none"}, None, seed=0)
    tanh = bert.build_model(TINY, None, seed=0)
    x = (torch.randint(5, 200, (2, 64), dtype=torch.int32), torch.zeros(2, 64, dtype=torch.int32),
         torch.ones(2, 64, dtype=torch.int32))
    default = {k: v for k, v in TINY.items() if k != "gelu_approximate"}
    with torch.no_grad():
        torch.testing.assert_close(bert.build_model(default, None, 0)(*x), erf(*x))
        torch.testing.assert_close(tanh(*x), erf(*x), rtol=0, atol=1e-2)
    with pytest.raises(ValueError, match="gelu_approximate"):
        bert.build_model({**TINY, "gelu_approximate": "sigmoid"}, None, 0)


@pytest.mark.filterwarnings("ignore:the float32 number:UserWarning")  # -10000 is exact
def test_fp16_conversions_keep_the_mask(tmp_path):
    """The pipeline's FP16 conversions: TorchScript .half() and onnxconverter-common's
    ONNX FP16 graph; -10000 fits FP16 and padding stays masked."""
    from onnxconverter_common import float16

    model = bert.build_model(TINY, None, seed=0)
    ids = torch.randint(5, 200, (2, 64), dtype=torch.int32)
    mask = torch.ones(2, 64, dtype=torch.int32)
    mask[:, 40:] = 0
    x = (ids * mask, torch.zeros_like(ids), mask)
    with torch.no_grad():
        expected = model(*x)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        # the trace shares the model's parameters: halve a copy
        half = torch.jit.trace(copy.deepcopy(model), x).to(device).half()
        got = half(*(t.to(device) for t in x))
        assert all(g.dtype == torch.float16 for g in got)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.float().cpu(), e, rtol=0, atol=5e-2)
        torch.onnx.export(model, x, str(tmp_path / "m.onnx"), input_names=NAMES,
                          opset_version=reference_opset("bert"), dynamo=False)
    fp16 = float16.convert_float_to_float16(onnx.load(str(tmp_path / "m.onnx")),
                                            keep_io_types=True)
    session = ort.InferenceSession(fp16.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, e in zip(session.run(None, dict(zip(NAMES, (t.numpy() for t in x)))), expected):
        np.testing.assert_allclose(g, e.numpy(), rtol=0, atol=5e-2)


def write_checkpoint(folder, state, config=None, wrap=True):
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state} if wrap else state, folder / "pytorch_model.bin")
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))


def dle_config(hparams, **changes):
    config = {k: hparams[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                      "intermediate_size", "max_position_embeddings",
                                      "type_vocab_size", "vocab_size")}
    return {**config, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02, **changes}


def test_dle_checkpoints_load_strictly(data, tmp_path):
    hp = {**TINY, "vocab_size": 500}  # DLE pads the vocabulary: 504 embedding rows
    source = bert.build_model(hp, None, seed=5)
    state = source.state_dict()
    x = tuple(torch.from_numpy(a) for a in bert.load_split(hp, str(data), "dev", 4)[0])
    with torch.no_grad():
        expected = source(*x)
    # run_squad's {'model': ...}, DDP's module. prefix, the pooler DLE's BertModel keeps,
    # config.json with the padded vocabulary, vocab.txt beside them
    ddp = {f"module.{k}": v for k, v in state.items()}
    ddp["module.bert.pooler.dense_act.weight"] = torch.zeros(32, 32)
    ddp["module.bert.pooler.dense_act.bias"] = torch.zeros(32)
    assert sorted(k.removeprefix("module.") for k in ddp) == sorted(dle_keys(2, pooler=True))
    folder = tmp_path / "dist-4l-qa"
    write_checkpoint(folder, ddp, dle_config(hp, vocab_size=504, distillation=True))
    (folder / "vocab.txt").write_text((data / "vocab.txt").read_text())
    # a bare state_dict with Google/HF names and an unpadded vocabulary
    hf = {k.replace("dense_act", "dense").replace("LayerNorm.weight", "LayerNorm.gamma")
          .replace("LayerNorm.bias", "LayerNorm.beta"): v for k, v in state.items()}
    hf["bert.embeddings.word_embeddings.weight"] = state[
        "bert.embeddings.word_embeddings.weight"][:500]
    write_checkpoint(tmp_path / "hf", hf, wrap=False)
    for ckpt in (folder, folder / "pytorch_model.bin", tmp_path / "hf/pytorch_model.bin"):
        loaded = bert.build_model(hp, str(ckpt), seed=99)
        with torch.no_grad():
            for g, e in zip(loaded(*x), expected):
                torch.testing.assert_close(g, e, rtol=0, atol=0)
    # the checkpoint's vocabulary through hparams vocab_file
    inputs, _ = bert.load_split({**hp, "vocab_file": str(folder / "vocab.txt")},
                                str(data), "dev", 4)
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(inputs, x))


def test_checkpoint_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing' does not exist"):
        bert.build_model(TINY, str(tmp_path / "missing"), 0)
    (tmp_path / "junk.bin").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="junk.bin' is not a readable"):
        bert.build_model(TINY, str(tmp_path / "junk.bin"), 0)
    state = bert.build_model(TINY, None, 0).state_dict()
    write_checkpoint(tmp_path / "other", state, dle_config(TINY, hidden_size=64,
                                                           num_hidden_layers=4))
    with pytest.raises(ValueError, match=r"other/config.json' disagrees with the hparams: "
                       r"hidden_size: checkpoint 64, hparams 32; num_hidden_layers: "
                       r"checkpoint 4, hparams 2"):
        bert.build_model(TINY, str(tmp_path / "other"), 0)
    write_checkpoint(tmp_path / "act", state, dle_config(TINY, hidden_act="relu"))
    with pytest.raises(ValueError, match="hidden_act: checkpoint 'relu'"):
        bert.build_model(TINY, str(tmp_path / "act"), 0)
    # weights of another size without a config, or with keys the network lacks
    write_checkpoint(tmp_path / "bare", state)
    with pytest.raises(ValueError, match="bare/pytorch_model.bin' does not fit"):
        bert.build_model({**TINY, "intermediate_size": 128}, str(tmp_path / "bare"), 0)
    write_checkpoint(tmp_path / "mlm", {**state, "cls.predictions.bias": torch.zeros(512)})
    with pytest.raises(ValueError, match="cls.predictions.bias"):
        bert.build_model(TINY, str(tmp_path / "mlm"), 0)
