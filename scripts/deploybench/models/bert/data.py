"""A small synthetic SQuAD v1.1 dataset and the WordPiece vocabulary it needs.

Paragraphs are made of template facts ("X was born in Y in 1850.") and filler
sentences; every question asks for a span of one fact, with one to three ground-truth
answers (variants and repeats, as SQuAD's dev annotators give) at their character
offsets. Names are built from a stem and a suffix that the vocabulary holds as separate
WordPieces ("Norwick" -> nor ##wick), and letters and digits are in it on their own
and as ##pieces, so every text tokenises without [UNK] (years become digit pieces).
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import numpy as np

from .squad import SPECIAL_TOKENS

SPLITS = ("train", "dev")  # SQuAD v1.1's two files

FIRST_NAMES = ("Anna", "Boris", "Clara", "David", "Elena", "Felix", "Greta", "Hugo", "Irene",
               "Jonas", "Karla", "Luca", "Mira", "Nils", "Olga", "Pavel", "Renée")
SURNAME = (("alder", "berg", "carl", "dorn", "falk", "gram", "holt", "kell", "lind", "nord",
            "rask", "wend"), ("son", "ini", "ova", "ez", "man"))
CITY = (("nor", "al", "ber", "cas", "dun", "el", "fal", "gar", "hal", "ken", "lor", "mar",
         "pen", "ros", "tal", "wil"), ("wick", "ton", "ford", "ham", "by", "mere", "dale"))
RIVER = (("ald", "bre", "cor", "dav", "esk", "fen", "gal", "tam", "ves", "yar"),
         ("a", "en", "is", "ow"))
WORDS = {
    "building": ("cathedral", "bridge", "library", "tower", "museum", "harbour", "castle",
                 "university", "market", "theatre"),
    "topic": ("astronomy", "botany", "chemistry", "geology", "history", "law", "medicine",
              "music", "painting", "philosophy"),
    "adj": ("mild", "cold", "warm", "wet", "dry", "windy", "pleasant", "harsh"),
    "season": ("spring", "summer", "autumn", "winter"),
    "thing": ("bread", "cheese", "wine", "glass", "textiles", "ships", "clocks", "paper"),
}
# (sentence, [(question, [answer variants, each a substring of the sentence])])
FACTS = (
    ("{person} was born in {city} in {year}.",
     [("Where was {person} born?", ["{city}"]),
      ("When was {person} born?", ["{year}", "in {year}"])]),
    ("The {building} of {city} was built by {person} in {year}.",
     [("Who built the {building} of {city}?", ["{person}", "{last}"]),
      ("When was the {building} of {city} built?", ["{year}"])]),
    ("{city} lies on the {river} river, {num} miles from {city2}.",
     [("Which river does {city} lie on?", ["{river}", "the {river} river"]),
      ("How far is {city} from {city2}?", ["{num} miles"])]),
    ("{person} wrote {num} books about {topic}.",
     [("How many books did {person} write?", ["{num}"]),
      ("What did {person} write books about?", ["{topic}"])]),
    ("In {year}, {person} moved to {city} to study {topic}.",
     [("What did {person} study in {city}?", ["{topic}"]),
      ("Where did {person} move to in {year}?", ["{city}", "to {city}"])]),
)
FILLERS = (
    "The weather in {city} is {adj} in {season}.",
    "Many visitors come to the {building} every {season}.",
    "{city} is known for its {thing} and its {adj} {season}s.",
    "{person} often said that {topic} was (very) hard work.",
    "Trade in {thing}, {thing2} and wine grew after {year}.",
)
PUNCTUATION = (".", ",", "?", "(", ")", "'", "-")


def _plain(word: str) -> str:
    """As BERT's uncased normaliser sees it: lower case, accents stripped."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def vocabulary() -> list[str]:
    """Special tokens, punctuation, every template and pool word, the name stems and
    suffixes (##), and single letters and digits, whole and as ##pieces."""
    texts = [s for fact, qs in FACTS for s in [fact, *(q for q, _ in qs)]] + list(FILLERS)
    words = {w for text in texts for w in re.findall(r"[A-Za-z]+", re.sub(r"\{\w+\}", " ", text))}
    words |= {w for pool in WORDS.values() for w in pool} | set(FIRST_NAMES)
    words |= {w for stems, _ in (SURNAME, CITY, RIVER) for w in stems} | {"river", "miles"}
    pieces = {f"##{s}" for _, suffixes in (SURNAME, CITY, RIVER) for s in suffixes}
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789")
    vocab = [*SPECIAL_TOKENS, *PUNCTUATION, *sorted({_plain(w) for w in words}),
             *sorted(pieces), *chars, *(f"##{c}" for c in chars)]
    return list(dict.fromkeys(vocab))  # unique, first occurrence kept


class _Pools:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def pick(self, pool):
        return pool[int(self.rng.integers(len(pool)))]

    def qid(self) -> str:  # SQuAD's ids: 24 hex digits
        return self.rng.bytes(12).hex()

    def name(self, parts) -> str:
        return (self.pick(parts[0]) + self.pick(parts[1])).capitalize()

    def slots(self) -> dict[str, str]:
        first, last = self.pick(FIRST_NAMES), self.name(SURNAME)
        city, city2 = self.name(CITY), self.name(CITY)
        while city2 == city:
            city2 = self.name(CITY)
        things = self.rng.choice(len(WORDS["thing"]), 3, replace=False)
        return {
            "person": f"{first} {last}", "last": last, "city": city, "city2": city2,
            "river": self.name(RIVER), "year": str(int(self.rng.integers(1500, 2000))),
            "num": str(int(self.rng.integers(2, 90))),
            **{k: self.pick(v) for k, v in WORDS.items()},
            "thing2": WORDS["thing"][things[1]], "thing3": WORDS["thing"][things[2]],
        }


def _paragraph(pools: _Pools, questions: int, fillers: int) -> dict:
    rng = pools.rng
    sentences, asks = [], []  # asks: (sentence index, question, answer variants)
    for _ in range(questions):
        sentence, qas = FACTS[int(rng.integers(len(FACTS)))]
        slots = pools.slots()  # fresh names per fact: each question has one answer
        question, variants = qas[int(rng.integers(len(qas)))]
        asks.append((len(sentences), question.format(**slots),
                     [v.format(**slots) for v in variants]))
        sentences.append(sentence.format(**slots))
    sentences += [pools.pick(FILLERS).format(**pools.slots())
                  for _ in range(int(rng.integers(0, fillers + 1)))]
    order = rng.permutation(len(sentences))
    starts, context = {}, ""
    for i in order:
        starts[int(i)] = len(context) + (1 if context else 0)
        context = f"{context} {sentences[i]}" if context else sentences[i]
    qas = []
    for index, question, variants in asks:
        answers = variants + variants[:1] if len(variants) < 3 else variants  # annotators
        answers = answers[: int(rng.integers(1, 4))]
        qas.append({"id": pools.qid(), "question": question, "answers": [
            {"text": a, "answer_start": starts[index] + sentences[index].index(a)}
            for a in answers]})
    return {"context": context, "qas": qas}


def generate(out_dir: str, seed: int, n_articles: int, paragraphs: int, questions: int,
             fillers: int) -> None:
    """`<split>-v1.1.json` for train and dev, each `n_articles` articles of `paragraphs`
    paragraphs with `questions` questions and up to `fillers` filler sentences, and
    vocab.txt."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for split_index, split in enumerate(SPLITS):
        pools = _Pools(np.random.default_rng([seed, split_index]))
        data = [{"title": pools.name(CITY),
                 "paragraphs": [_paragraph(pools, questions, fillers)
                                for _ in range(paragraphs)]}
                for _ in range(n_articles)]
        with open(out / f"{split}-v1.1.json", "w", encoding="utf-8") as f:
            json.dump({"version": "1.1", "data": data}, f, ensure_ascii=False)
    (out / "vocab.txt").write_text("\n".join(vocabulary()) + "\n", encoding="utf-8")
