"""BERT's SQuAD data: the generated files, the features DLE's loader makes of them, the
v1.1 metric, and errors naming the path."""

import io
import json

import numpy as np
import pytest
import torch

from deploybench.models import bert
from deploybench.models.bert import data as bert_data
from deploybench.models.bert import squad as bert_squad
from testkit.bert import (
    SIZE,
    TINY,
    data,  # noqa: F401 (a fixture)
)


def squad_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def qas(path):
    for article in squad_json(path)["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield paragraph["context"], qa


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
