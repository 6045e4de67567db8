"""BERT plug-in: extractive question answering on SQuAD v1.1 (see deploybench.plugins).

Follows DeepLearningExamples' PyTorch BERT as its triton/ folder deploys the distilled
4-layer model: the network of `modeling.py` (`net`), run_squad's features and
answer decoding with the official v1.1 exact match and F1 (`squad`), and its
Triton tensors: input__0 input_ids, input__1 segment_ids, input__2 input_mask (INT32),
output__0 start logits, output__1 end logits.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ...plugins import read_torch_file
from . import data, squad
from .net import ARCH_KEYS, BertForQuestionAnswering, embedding_rows

# Checkpoint keys the QA network does not have: the pooler (DLE's BertModel builds one
# unless distilling; QA never reads it) and the position ids buffer of HF checkpoints.
_UNUSED_PREFIXES = ("bert.pooler.", "bert.embeddings.position_ids")


def read_checkpoint(checkpoint: str) -> tuple[dict, dict | None, Path]:
    """(state_dict, config.json or None, weights path) of a DLE BERT checkpoint: a folder
    with pytorch_model.bin and config.json (as DLE's triton scripts take it), or the
    weights file itself (config.json beside it, if any). The weights may be wrapped in
    {'model': ...} (run_squad.py) and carry DistributedDataParallel's `module.` prefix;
    Google/HF names (LayerNorm gamma/beta, intermediate.dense) are mapped to DLE's."""
    path = Path(checkpoint)
    weights = path / "pytorch_model.bin" if path.is_dir() else path
    ckpt = read_torch_file(weights, "BERT")
    state = ckpt.get("model", ckpt) if isinstance(ckpt, dict) else ckpt
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise ValueError(f"BERT checkpoint '{weights}' holds no state_dict")
    renamed = {}
    for key, value in state.items():
        key = key.removeprefix("module.").replace(".intermediate.dense.",
                                                  ".intermediate.dense_act.")
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta",
                                                                         "LayerNorm.bias")
        if not key.startswith(_UNUSED_PREFIXES):
            renamed[key] = value
    config_file = weights.parent / "config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else None
    return renamed, config, weights


def _check_config(config: dict, hparams: dict, path: Path) -> None:
    def size(key, value):  # the vocabulary counts as the padded embedding table
        return embedding_rows(value) if key == "vocab_size" else value

    wrong = [f"{key}: checkpoint {config[key]!r}, hparams {hparams[key]!r}"
             for key in ARCH_KEYS
             if key in config and size(key, config[key]) != size(key, hparams[key])]
    if config.get("hidden_act", "gelu") != "gelu":
        wrong.append(f"hidden_act: checkpoint {config['hidden_act']!r}, this network: 'gelu'")
    if wrong:
        raise ValueError(f"BERT checkpoint config '{path.parent / 'config.json'}' disagrees "
                         f"with the hparams: " + "; ".join(wrong))


def build_model(hparams: dict, checkpoint: str | None, seed: int) -> torch.nn.Module:
    """BertForQuestionAnswering (eval, FP32, CPU): DLE checkpoint weights loaded strictly,
    or BERT's normal(0, 0.02) initialisation from `seed` when `checkpoint` is None."""
    torch.manual_seed(seed)
    model = BertForQuestionAnswering(hparams)
    if checkpoint is not None:
        state, config, path = read_checkpoint(checkpoint)
        if config is not None:
            _check_config(config, hparams, path)
        words = state.get("bert.embeddings.word_embeddings.weight")
        rows = model.bert.embeddings.word_embeddings.num_embeddings
        if words is not None and len(words) == hparams["vocab_size"] < rows:
            # unpadded (Google/HF) vocabulary: zero rows that no token id reaches
            state["bert.embeddings.word_embeddings.weight"] = torch.cat(
                [words, words.new_zeros(rows - len(words), words.shape[1])])
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"BERT checkpoint '{path}' does not fit the configured hparams: "
                             f"{err}") from None
    return model.float().eval()


def generate_dataset(hparams: dict, out_dir: str, seed: int, n_articles: int,
                     paragraphs: int, questions: int, fillers: int) -> None:
    """A synthetic SQuAD v1.1 dataset (train-v1.1.json, dev-v1.1.json) and its vocab.txt:
    `n_articles` x `paragraphs` paragraphs, each with `questions` questions and up to
    `fillers` extra sentences (long paragraphs exercise the doc stride)."""
    n_tokens = len(data.vocabulary())
    if n_tokens > hparams["vocab_size"]:
        raise ValueError(f"the generated vocabulary has {n_tokens} tokens, more than hparams "
                         f"vocab_size {hparams['vocab_size']}")
    data.generate(out_dir, seed, n_articles, paragraphs, questions, fillers)


def vocab_path(hparams: dict, data_dir: str) -> Path:
    """hparams vocab_file (a checkpoint's vocab.txt; relative to the working directory),
    or vocab.txt in the data folder when it is null or absent."""
    return Path(hparams.get("vocab_file") or Path(data_dir) / "vocab.txt")


def _strings(values: list[str]) -> np.ndarray:
    # fixed-width unicode (never object arrays): the targets are read without pickle
    return np.array(values, dtype=f"<U{max([1, *map(len, values)])}")


def load_split(hparams: dict, data_dir: str, split: str,
               max_samples: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The first `max_samples` features of `<split>-v1.1.json` (all when None) as the
    Triton inputs [input_ids, segment_ids, input_mask] (INT32 [N, max_seq_length]), and
    the targets `evaluate` decodes and scores them with:
      0 feature -> example index [N]           1 context character offsets [N, seq, 2]
      2 token is max context [N, seq]          3 features per example (all of them) [E]
      4 example -> context index [E]           5 contexts [C]
      6 ground-truth answers [E, A] ('' pads)  7 question ids [E]
    """
    if hparams["max_seq_length"] > hparams["max_position_embeddings"]:
        raise ValueError(f"max_seq_length {hparams['max_seq_length']} exceeds "
                         f"max_position_embeddings {hparams['max_position_embeddings']}")
    examples, contexts = squad.read_squad(Path(data_dir) / f"{split}-v1.1.json")
    tok = squad.tokenizer(vocab_path(hparams, data_dir), hparams["do_lower_case"],
                               hparams["vocab_size"])
    feats, n_examples = squad.make_features(examples, contexts, tok, hparams, max_samples)
    examples = examples[:n_examples]
    used = sorted({ex.context for ex in examples})  # only the contexts these examples read
    context_index = {c: i for i, c in enumerate(used)}
    width = max(len(ex.answers) for ex in examples) if examples else 1
    answers = _strings([a for ex in examples
                        for a in ex.answers + [""] * (width - len(ex.answers))])
    inputs = [np.asarray(a, dtype=np.int32).reshape(-1, hparams["max_seq_length"])
              for a in (feats.input_ids, feats.segment_ids, feats.input_mask)]
    seq = hparams["max_seq_length"]
    targets = [
        np.asarray(feats.example, dtype=np.int32),
        np.asarray(feats.offsets, dtype=np.int32).reshape(-1, seq, 2),
        np.asarray(feats.max_context, dtype=bool).reshape(-1, seq),
        np.asarray(feats.example_features, dtype=np.int32),
        np.asarray([context_index[ex.context] for ex in examples], dtype=np.int32),
        _strings([contexts[c] for c in used]),
        answers.reshape(len(examples), width),
        _strings([ex.qid for ex in examples]),
    ]
    return inputs, targets


def predict_answers(hparams: dict, predictions: list[np.ndarray],
                    targets: list[np.ndarray]) -> dict[int, str]:
    """Example index -> predicted answer text, for the examples all of whose features are
    in `predictions` (the first N features): run_squad's best valid span over the
    example's features (ties: the earlier feature), cut from the context by the tokens'
    character offsets; DLE's "empty" where no span is valid."""
    start, end = predictions[0], predictions[1]
    feature_example, offsets, max_context, example_features, example_context, contexts = \
        targets[:6]
    n = len(start)
    if n > len(feature_example) or len(end) != n:
        raise ValueError(f"{len(start)} start and {len(end)} end logit rows for "
                         f"{len(feature_example)} features")
    present = np.bincount(feature_example[:n], minlength=len(example_features))
    complete = (present == example_features) & (example_features > 0)
    best: dict[int, tuple[float, str]] = {}
    for f in range(n):
        e = int(feature_example[f])
        if not complete[e]:
            continue
        span = squad.best_span(start[f], end[f], offsets[f], max_context[f],
                                    hparams["n_best_size"], hparams["max_answer_length"])
        if span is not None and (e not in best or span[0] > best[e][0]):
            context = str(contexts[example_context[e]])
            best[e] = (span[0], context[offsets[f, span[1], 0] : offsets[f, span[2], 1]])
    return {int(e): best[e][1] if e in best else "empty" for e in np.flatnonzero(complete)}


def evaluate(hparams: dict, predictions: list[np.ndarray],
             targets: list[np.ndarray]) -> dict[str, float]:
    """SQuAD v1.1 exact match and F1 (percent, the official evaluate-v1.1.py rules) over
    the examples whose features are all in the predictions."""
    answers = predict_answers(hparams, predictions, targets)
    if not answers:
        raise ValueError("no example has all its features in the predictions")
    truths = [[str(a) for a in targets[6][e] if str(a)] or [""] for e in answers]
    return squad.squad_scores(list(answers.values()), truths)
