"""The BERT plug-in: DLE's BertForQuestionAnswering layout and checkpoints, the SQuAD v1.1
data (generator, run_squad features with doc stride), answer decoding and the official
v1.1 metric, and the network's exports (TorchScript trace and script, ONNX int32)."""

import copy
import io
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from conftest import reference_opset
from deploybench.models import bert
from deploybench.models.bert import data as bert_data
from deploybench.models.bert import squad as bert_squad

TINY = {
    "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02, "gelu_approximate": "tanh", "max_seq_length": 64,
    "doc_stride": 16, "max_query_length": 16, "n_best_size": 20, "max_answer_length": 30,
    "do_lower_case": True, "vocab_file": None,
}
# DLE's distilled 4L-288D student with run_squad's settings (config/models/bert.yaml)
REFERENCE = {**TINY, "vocab_size": 30522, "hidden_size": 288, "num_hidden_layers": 4,
             "num_attention_heads": 12, "intermediate_size": 1152,
             "max_position_embeddings": 512, "max_seq_length": 384, "doc_stride": 128,
             "max_query_length": 64}
SIZE = {"n_articles": 2, "paragraphs": 3, "questions": 3, "fillers": 6}
NAMES = ["input__0", "input__1", "input__2"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("squad")
    bert.generate_dataset(TINY, str(out), seed=0, **SIZE)
    return out


def squad_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def qas(path):
    for article in squad_json(path)["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield paragraph["context"], qa


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


def test_generated_squad_files(data, tmp_path):
    assert sorted(p.name for p in data.iterdir()) == ["dev-v1.1.json", "train-v1.1.json",
                                                      "vocab.txt"]
    dev = squad_json(data / "dev-v1.1.json")
    assert dev["version"] == "1.1" and len(dev["data"]) == 2
    assert all(len(a["paragraphs"]) == 3 for a in dev["data"])
    n = 0
    for context, qa in qas(data / "dev-v1.1.json"):
        n += 1
        assert len(qa["id"]) == 24 and qa["question"].endswith("?")
        assert 1 <= len(qa["answers"]) <= 3
        for answer in qa["answers"]:  # answer_start points at the answer text
            start = answer["answer_start"]
            assert context[start : start + len(answer["text"])] == answer["text"]
    assert n == 2 * 3 * 3
    # the vocabulary: BERT's special tokens first, unique, and no text needs [UNK]
    vocab = (data / "vocab.txt").read_text().splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(vocab)) == len(vocab) <= TINY["vocab_size"]
    tok = bert_squad.tokenizer(data / "vocab.txt", True, TINY["vocab_size"])
    for context, qa in qas(data / "dev-v1.1.json"):
        for text in (context, qa["question"]):
            assert "[UNK]" not in tok.encode(text, add_special_tokens=False).tokens
    assert tok.encode("Renée Norwick", add_special_tokens=False).tokens == [
        "renee", "nor", "##wick"]
    # seeded: the same bytes again, other bytes for another seed
    bert.generate_dataset(TINY, str(tmp_path / "a"), seed=0, **SIZE)
    bert.generate_dataset(TINY, str(tmp_path / "b"), seed=1, **SIZE)
    same = (data / "dev-v1.1.json").read_bytes()
    assert (tmp_path / "a/dev-v1.1.json").read_bytes() == same
    assert (tmp_path / "b/dev-v1.1.json").read_bytes() != same
    with pytest.raises(ValueError, match="more than hparams vocab_size 100"):
        bert.generate_dataset({**TINY, "vocab_size": 100}, str(tmp_path / "c"), 0, **SIZE)


def test_load_split_gives_dle_features_and_plain_targets(data, tmp_path):
    inputs, targets = bert.load_split(TINY, str(data), "dev", max_samples=None)
    ids, segments, mask = inputs
    n = len(ids)
    assert n > 18  # long paragraphs: several features per question
    assert all(a.dtype == np.int32 and a.shape == (n, 64) for a in inputs)
    vocab = (data / "vocab.txt").read_text().splitlines()
    examples, contexts = bert_squad.read_squad(data / "dev-v1.1.json")
    offsets, max_context = targets[1], targets[2]
    for f in range(n):
        real = int(mask[f].sum())
        assert (mask[f, :real] == 1).all() and not mask[f, real:].any()
        assert not ids[f, real:].any() and not segments[f, real:].any()  # zero padding
        seps = np.flatnonzero(ids[f] == vocab.index("[SEP]"))
        assert ids[f, 0] == vocab.index("[CLS]") and seps[-1] == real - 1 and len(seps) == 2
        # [CLS] question [SEP]: segment 0; context [SEP]: segment 1
        assert not segments[f, : seps[0] + 1].any() and (segments[f, seps[0] + 1 : real] == 1).all()
        context_tokens = np.flatnonzero(offsets[f, :, 0] >= 0)
        np.testing.assert_array_equal(context_tokens, np.arange(seps[0] + 1, real - 1))
        text = contexts[examples[targets[0][f]].context]
        for t in context_tokens:  # the offsets cut each WordPiece out of the context
            piece = text[offsets[f, t, 0] : offsets[f, t, 1]]
            assert bert_data._plain(piece) == vocab[ids[f, t]].removeprefix("##")
        assert not max_context[f, offsets[f, :, 0] < 0].any()
    # every context token is the max-context token of exactly one feature
    for e, count in enumerate(targets[3]):
        feats = np.flatnonzero(targets[0] == e)
        assert len(feats) == count
        tokens = offsets[feats][:, :, 0]
        flagged = offsets[feats][max_context[feats]][:, 0]
        assert len(flagged) == len(set(flagged)) == len(set(tokens[tokens >= 0]))
    assert targets[5].dtype.kind == "U" and targets[6].dtype.kind == "U"
    distinct = [len({a["text"] for a in qa["answers"]}) for _, qa in qas(data / "dev-v1.1.json")]
    assert targets[6].shape == (18, max(distinct))
    assert [(row != "").sum() for row in targets[6]] == distinct
    # the first max_samples features; targets survive savez / load without pickle
    first, first_targets = bert.load_split(TINY, str(data), "dev", max_samples=20)
    assert all(np.array_equal(a, b[:20]) for a, b in zip(first, inputs))
    buffer = io.BytesIO()
    np.savez(buffer, *first_targets)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as npz:
        loaded = [npz[f"arr_{i}"] for i in range(len(first_targets))]
    assert all(np.array_equal(a, b) for a, b in zip(loaded, first_targets))
    assert loaded[3].sum() >= 20 and loaded[0][-1] == len(loaded[3]) - 1


def write_squad(path, context, question, answer):
    start = context.index(answer)
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [{
        "context": context, "qas": [{"id": "q1", "question": question, "answers": [
            {"text": answer, "answer_start": start}]}]}]}]}))


def test_features_slide_over_a_long_context_with_doc_stride(tmp_path):
    """run_squad's docstring example: 12 context tokens, windows of 5 every 3 tokens ->
    spans at 0, 3, 6, 9; 'bought' (token 7) has most context in the span at 6."""
    context = "the man went to the store and bought a gallon of milk"
    words = sorted(set(context.split()) | {"what", "did", "he", "buy", "?"})
    (tmp_path / "vocab.txt").write_text("\n".join([*bert_data.SPECIAL_TOKENS, *words]) + "\n")
    write_squad(tmp_path / "dev-v1.1.json", context, "What did he buy?", "bought a gallon")
    hp = {**TINY, "max_seq_length": 5 + 5 + 3, "doc_stride": 3}  # 5-token query
    inputs, windows = bert.load_split(hp, str(tmp_path), "dev", None)
    assert len(inputs[0]) == 4 and list(windows[3]) == [4]
    chars = [[c for c in windows[1][f, :, 0] if c >= 0] for f in range(4)]
    starts = [[context[:c].count(" ") for c in span] for span in chars]  # word indices
    assert starts == [[0, 1, 2, 3, 4], [3, 4, 5, 6, 7], [6, 7, 8, 9, 10], [9, 10, 11]]
    # feature position of context token t in window f: 7 ([CLS] + 5 + [SEP]) + t - 3 f
    bought = [bool(windows[2][f, 7 + 7 - 3 * f]) if 3 * f <= 7 < 3 * f + 5 else None
              for f in range(4)]
    assert bought == [None, False, True, None]
    vocab = (tmp_path / "vocab.txt").read_text().splitlines()
    assert [vocab[i] for i in inputs[0][3]] == [
        "[CLS]", "what", "did", "he", "buy", "?", "[SEP]", "gallon", "of", "milk", "[SEP]",
        "[PAD]", "[PAD]"]
    # decoding: the best valid span; 'bought' scores higher in window 1, where it is not
    # the max-context token, so window 2's 'bought a gallon' wins
    start, end = np.zeros((2, 4, 13), np.float32)
    start[2, 7 + 7 - 6] = end[2, 7 + 9 - 6] = 5.0
    start[1, 7 + 7 - 3] = end[1, 7 + 7 - 3] = 9.0
    assert bert.predict_answers(hp, [start, end], windows) == {0: "bought a gallon"}
    assert bert.evaluate(hp, [start, end], windows) == {"exact_match": 100.0, "f1": 100.0}
    # a longer question is cut to max_query_length tokens, the windows grow to match
    inputs, windows = bert.load_split({**hp, "max_query_length": 2}, str(tmp_path), "dev", None)
    assert [vocab[i] for i in inputs[0][0][:4]] == ["[CLS]", "what", "did", "[SEP]"]
    assert (windows[1][0, :, 0] >= 0).sum() == 13 - 2 - 3


def test_squad_v11_metric_by_hand():
    assert bert_squad.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert bert_squad.normalize_answer("an apple a day") == "apple day"
    # pred {cat, sat} vs gold {cat, sat, down}: P 1, R 2/3 -> F1 0.8
    assert bert_squad.f1_score("the cat sat", "A cat sat down.") == pytest.approx(0.8)
    assert bert_squad.exact_match("The Cat", "cat!") == 1.0
    assert bert_squad.f1_score("", "cat") == 0.0
    # best over the ground truths: (0.8 | 0) and (1 | 1) -> F1 90, EM 50
    scores = bert_squad.squad_scores(["cat sat", "dog"], [["a cat sat down", "mouse"],
                                                          ["Dog!", "a dog"]])
    assert scores == {"exact_match": pytest.approx(50.0), "f1": pytest.approx(90.0)}
    # repeated tokens count by multiplicity: pred {a:2}... 'b b c' vs 'b c c' -> 2/3
    assert bert_squad.f1_score("b b c", "b c c") == pytest.approx(2 / 3)


def gold_logits(data, inputs, targets, n):
    """Logits that point at the first ground truth of every example in each feature."""
    answers = {qa["id"]: qa["answers"][0] for _, qa in qas(data / "dev-v1.1.json")}
    start, end = np.zeros((2, n, inputs[0].shape[1]), np.float32)
    for f in range(n):
        answer = answers[str(targets[7][targets[0][f]])]
        first, last = answer["answer_start"], answer["answer_start"] + len(answer["text"])
        s = np.flatnonzero(targets[1][f, :, 0] == first)
        e = np.flatnonzero(targets[1][f, :, 1] == last)
        if len(s) and len(e):
            start[f, s[0]], end[f, e[0]] = 8.0, 8.0
    return start, end


def test_logits_at_the_gold_span_score_100(data):
    inputs, targets = bert.load_split(TINY, str(data), "dev", max_samples=None)
    n = len(inputs[0])
    start, end = gold_logits(data, inputs, targets, n)
    assert bert.evaluate(TINY, [start, end], targets) == {"exact_match": 100.0, "f1": 100.0}
    # only examples with all their features in the predictions count
    cut = int(np.flatnonzero(targets[0] == 5)[0]) + 1  # the first feature of example 5
    assert sorted(bert.predict_answers(TINY, [start[:cut], end[:cut]], targets)) == [0, 1, 2,
                                                                                    3, 4]
    # answers longer than max_answer_length are not valid spans
    short = bert.evaluate({**TINY, "max_answer_length": 1}, [start, end], targets)
    assert short["exact_match"] < 100.0
    with pytest.raises(ValueError, match="no example has all its features"):
        bert.evaluate(TINY, [start[:0], end[:0]], targets)
    # the random network: a valid answer for each, scored on the same scale
    model = bert.build_model(TINY, None, seed=0)
    with torch.no_grad():
        logits = model(*[torch.from_numpy(a) for a in inputs])
    scores = bert.evaluate(TINY, [t.numpy() for t in logits], targets)
    assert set(scores) == {"exact_match", "f1"} and 0 <= scores["exact_match"] < 50


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


def test_data_errors_name_the_path(data, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope/dev-v1.1.json' does not exist"):
        bert.load_split(TINY, str(tmp_path / "nope"), "dev", None)
    with pytest.raises(FileNotFoundError, match="vocab.txt' does not exist"):
        bert.load_split({**TINY, "vocab_file": str(tmp_path / "vocab.txt")}, str(data), "dev",
                        None)
    with pytest.raises(ValueError, match="has 2.. tokens, more than hparams vocab_size 100"):
        bert.load_split({**TINY, "vocab_size": 100}, str(data), "dev", None)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 32"):
        bert.load_split({**TINY, "max_position_embeddings": 32}, str(data), "dev", None)
