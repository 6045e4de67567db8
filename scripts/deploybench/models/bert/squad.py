"""SQuAD v1.1 for BERT: the JSON reader, DLE's run_squad features, answer decoding and
the official v1.1 exact-match / F1.

Features follow run_squad.convert_examples_to_features: the question truncated to
max_query_length WordPiece tokens, the context cut into spans of at most
max_seq_length - len(question) - 3 tokens every doc_stride tokens, each feature
`[CLS] question [SEP] span [SEP]` with segment ids 0 / 1, mask 1 and zero padding.
Tokenisation is the `tokenizers` package's BERT WordPiece; unlike DLE it runs on the
whole context and keeps each token's character offsets, so an answer maps back to the
context by offsets instead of DLE's whitespace-word alignment (get_final_text).
"""

from __future__ import annotations

import collections
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_PUNCTUATION = frozenset(string.punctuation)


@dataclass
class Example:
    qid: str
    question: str
    context: int  # index into the list of contexts
    answers: list[str]


@dataclass
class Features:
    """One row per feature; `example_features` counts every feature of an example (also
    those cut off by max_features), so the metric can skip incomplete examples."""
    input_ids: list = field(default_factory=list)
    segment_ids: list = field(default_factory=list)
    input_mask: list = field(default_factory=list)
    offsets: list = field(default_factory=list)      # [seq, 2] chars, -1 outside the span
    max_context: list = field(default_factory=list)  # [seq] DLE's token_is_max_context
    example: list = field(default_factory=list)
    example_features: list = field(default_factory=list)


def read_squad(path: Path) -> tuple[list[Example], list[str]]:
    """The questions of a SQuAD v1.1 file (articles -> paragraphs -> qas) in file order,
    with their distinct ground-truth answers, and the paragraph texts they refer to."""
    if not path.is_file():
        raise FileNotFoundError(f"SQuAD file '{path}' does not exist")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    examples, contexts = [], []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            contexts.append(paragraph["context"])
            for qa in paragraph["qas"]:
                # repeated answers (annotators agreeing) leave a max over them unchanged
                answers = list(dict.fromkeys(a["text"] for a in qa["answers"]))
                examples.append(Example(qa["id"], qa["question"], len(contexts) - 1, answers))
    return examples, contexts


def tokenizer(vocab_file: Path, do_lower_case: bool, vocab_size: int):
    """BERT's WordPiece (lower-casing and accent stripping with do_lower_case, as DLE's
    BasicTokenizer does); refuses a vocabulary the embeddings cannot index."""
    from tokenizers import BertWordPieceTokenizer

    if not vocab_file.is_file():
        raise FileNotFoundError(f"BERT vocabulary '{vocab_file}' does not exist")
    tokens = vocab_file.read_text(encoding="utf-8").splitlines()
    if len(tokens) > vocab_size:
        raise ValueError(f"BERT vocabulary '{vocab_file}' has {len(tokens)} tokens, more than "
                         f"hparams vocab_size {vocab_size}")
    missing = [t for t in SPECIAL_TOKENS[1:4] if t not in tokens]
    if missing:
        raise ValueError(f"BERT vocabulary '{vocab_file}' lacks {', '.join(missing)}")
    return BertWordPieceTokenizer(str(vocab_file), lowercase=do_lower_case)


def doc_spans(n_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) windows over the context tokens, as run_squad's sliding window."""
    spans, start = [], 0
    while start < n_tokens:
        length = min(n_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length == n_tokens:
            break
        start += min(length, stride)
    return spans


def max_context(spans: list[tuple[int, int]], n_tokens: int) -> np.ndarray:
    """[span, token]: whether the span is the token's "max context" one (the most
    context on its shorter side, run_squad's _check_is_max_context; first span wins ties)."""
    if not spans:  # an empty context
        return np.zeros((0, n_tokens), dtype=bool)
    pos = np.arange(n_tokens)
    scores = np.full((len(spans), n_tokens), -np.inf)
    for i, (start, length) in enumerate(spans):
        inside = (pos >= start) & (pos < start + length)
        left, right = pos - start, start + length - 1 - pos
        scores[i, inside] = (np.minimum(left, right) + 0.01 * length)[inside]
    best = scores.argmax(axis=0)
    return best[None, :] == np.arange(len(spans))[:, None]


def make_features(examples: list[Example], contexts: list[str], tok, hparams: dict,
                  max_features: int | None) -> tuple[Features, int]:
    """The features of the first examples, up to `max_features` features; returns them
    and the number of examples they touch."""
    seq, stride = hparams["max_seq_length"], hparams["doc_stride"]
    max_query = hparams["max_query_length"]
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    encoded_contexts = {}
    out, n_examples = Features(), 0
    for e, ex in enumerate(examples):
        if max_features is not None and len(out.example) >= max_features:
            break
        n_examples = e + 1
        query = tok.encode(ex.question, add_special_tokens=False).ids[:max_query]
        if ex.context not in encoded_contexts:
            enc = tok.encode(contexts[ex.context], add_special_tokens=False)
            encoded_contexts[ex.context] = (enc.ids, enc.offsets)
        doc_ids, doc_offsets = encoded_contexts[ex.context]
        if len(query) + 3 >= seq:  # run_squad would loop forever
            raise ValueError(f"question {ex.qid!r} leaves no room for the context in "
                             f"max_seq_length {seq}; lower max_query_length {max_query}")
        spans = doc_spans(len(doc_ids), seq - len(query) - 3, stride)
        best = max_context(spans, len(doc_ids))
        first = len(query) + 2  # [CLS] query [SEP]
        for i, (start, length) in enumerate(spans):
            ids = [cls_id, *query, sep_id, *doc_ids[start : start + length], sep_id]
            pad = seq - len(ids)
            out.input_ids.append(ids + [0] * pad)
            out.segment_ids.append([0] * first + [1] * (length + 1) + [0] * pad)
            out.input_mask.append([1] * len(ids) + [0] * pad)
            offsets = np.full((seq, 2), -1, dtype=np.int32)
            offsets[first : first + length] = doc_offsets[start : start + length]
            out.offsets.append(offsets)
            flags = np.zeros(seq, dtype=bool)
            flags[first : first + length] = best[i, start : start + length]
            out.max_context.append(flags)
            out.example.append(e)
        out.example_features.append(len(spans))
    if max_features is not None:
        for name in ("input_ids", "segment_ids", "input_mask", "offsets", "max_context",
                     "example"):
            del getattr(out, name)[max_features:]
    return out, n_examples


# The official SQuAD v1.1 evaluation (evaluate-v1.1.py), rewritten.
def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and the articles a/an/the, collapse whitespace."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str) -> float:
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    common = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: list[str], truths: list[list[str]]) -> dict[str, float]:
    """Percent exact match and F1, each the best over an example's ground truths."""
    em = [max(exact_match(p, t) for t in ts) for p, ts in zip(predictions, truths)]
    f1 = [max(f1_score(p, t) for t in ts) for p, ts in zip(predictions, truths)]
    return {"exact_match": 100.0 * float(np.mean(em)), "f1": 100.0 * float(np.mean(f1))}


def best_span(start_logits: np.ndarray, end_logits: np.ndarray, offsets: np.ndarray,
              is_max_context: np.ndarray, n_best: int,
              max_answer_length: int) -> tuple[float, int, int] | None:
    """(score, start token, end token) of the best answer of one feature, as run_squad's
    get_valid_prelim_predictions + sort: the n_best start and end tokens by logit, the
    pairs inside the context with start <= end, at most max_answer_length tokens long and
    starting at a max-context token; ties go to the better-ranked start, then end."""
    start_logits = start_logits.astype(np.float64)
    end_logits = end_logits.astype(np.float64)
    starts = np.argsort(-start_logits, kind="stable")[:n_best]
    ends = np.argsort(-end_logits, kind="stable")[:n_best]
    in_context = offsets[:, 0] >= 0
    length = ends[None, :] - starts[:, None] + 1
    valid = ((in_context[starts] & is_max_context[starts])[:, None] & in_context[ends][None, :]
             & (length >= 1) & (length <= max_answer_length))
    if not valid.any():
        return None
    scores = np.where(valid, start_logits[starts][:, None] + end_logits[ends][None, :], -np.inf)
    i, j = np.unravel_index(np.argmax(scores), scores.shape)  # first maximum, row-major
    return float(scores[i, j]), int(starts[i]), int(ends[j])
