"""FastPitch evaluation data: DLE's LJSpeech filelists (`path|...|text` lines, such as
`filelists/ljs_audio_text_test_filelist.txt`: `wavs/LJ045-0096.wav|Mrs. De ...`, or the
`mels/...|durations/...|pitch_char/...|text` lists its Triton dataloader reads).

Inference needs the text only: the audio, mel, duration and pitch files the lines name
are not read, and `generate` writes filelists whose `wavs/` files do not exist.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .text import PAD_ID, text_to_ids

# DLE's LJSpeech filelists (FastPitch 1.0) by split name.
FILELISTS = {split: f"ljs_audio_text_{split}_filelist.txt" for split in ("train", "val", "test")}


def filelist_path(data_dir: str, split: str) -> Path:
    """A split's filelist: DLE's file for train/val/test, under `filelists/` of the data
    folder or in it; any other split names a filelist relative to the data folder."""
    root = Path(data_dir)
    if split in FILELISTS:
        tried = [root / "filelists" / FILELISTS[split], root / FILELISTS[split]]
    else:
        tried = [root / split]
    for path in tried:
        if path.is_file():
            return path
    raise FileNotFoundError(f"no filelist for split '{split}': tried "
                            + ", ".join(str(p) for p in tried))


def read_texts(path: Path, n_speakers: int = 1, max_samples: int | None = None) -> list[str]:
    """The texts of a filelist, in file order: the last field, or the one before the
    speaker id of a multi-speaker list."""
    texts = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("|")
            columns = 2 if n_speakers <= 1 else 3
            if len(fields) < columns:
                raise ValueError(f"{path}:{number}: expected '<path>|...|<text>"
                                 f"{'|<speaker>' if n_speakers > 1 else ''}', got {line!r}")
            texts.append(fields[-1] if n_speakers <= 1 else fields[-2])
            if max_samples is not None and len(texts) == max_samples:
                break
    return texts


def encode(texts: list[str], symbol_set: str, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Symbol ids padded with PAD_ID (longer texts cut) [N, length] int64, and each
    text's full symbol count [N] int64 (above `length` where it was cut)."""
    ids = np.full((len(texts), length), PAD_ID, dtype=np.int64)
    full = np.zeros(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        seq = text_to_ids(text, symbol_set)
        full[i] = len(seq)
        ids[i, : min(len(seq), length)] = seq[:length]
    return ids, full


# --- a generated filelist ------------------------------------------------------------

_SUBJECTS = ("the committee", "Mr. Howard", "the witness", "Dr. Miller", "the governor",
             "his brother", "the old printer", "Capt. Reed", "the clerk", "the prisoners",
             "a crowd of 1,200 people", "the Secret Service", "she", "they")
_VERBS = ("reported", "believed", "wrote", "testified", "remembered", "noticed",
          "explained", "denied", "said")
_CLAUSES = ("that the house on St. James Street was closed in {year}",
            "that {n} men were held in the yard for {days} days",
            "that the bill of ${money} was never paid",
            "that {pct}% of the letters came on the {nth} of May",
            "that the carriage left at {hour} o'clock",
            "that the type was set by hand, one letter at a time",
            "how the evidence pointed elsewhere",
            "that the ship carried {n} passengers")
_TAILS = ("", "", "", " and nobody disputed it", " before the inquiry ended",
          ", as the newspapers said at the time", " in the spring of {year}")


def _ordinal(n: int) -> str:
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _sentence(rng: np.random.Generator) -> str:
    """One or two clauses: 45 to 260 symbols, 110 on average, a quarter of them above
    128 (LJSpeech's test filelist: 100 on average, 24 % above 128)."""
    def pick(options):
        return options[rng.integers(len(options))]

    slots = {"year": rng.integers(1700, 1990), "n": rng.integers(2, 500),
             "days": rng.integers(2, 40), "pct": rng.integers(1, 100),
             "money": f"{rng.integers(1, 900)}.{rng.integers(0, 100):02d}",
             "nth": _ordinal(int(rng.integers(1, 32))), "hour": rng.integers(1, 13)}
    text = f"{pick(_SUBJECTS)} {pick(_VERBS)} {pick(_CLAUSES)}{pick(_TAILS)}"
    if rng.random() < 0.15:
        text += f"; {pick(_SUBJECTS)} {pick(_VERBS)} {pick(_CLAUSES)}"
    return (text[0].upper() + text[1:] + ".").format(**slots)


def generate(out_dir: str, seed: int, samples: int) -> None:
    """DLE's three LJSpeech filelists under `filelists/`, `samples` generated English
    sentences each (numbers, money, abbreviations: what english_cleaners expands)."""
    rng = np.random.default_rng(seed)
    folder = Path(out_dir) / "filelists"
    folder.mkdir(parents=True, exist_ok=True)
    for chapter, name in enumerate(FILELISTS.values(), 1):
        lines = [f"wavs/GEN{chapter:03d}-{i:04d}.wav|{_sentence(rng)}\n"
                 for i in range(1, samples + 1)]
        (folder / name).write_text("".join(lines), encoding="utf-8")
