"""FastPitch's text: DLE's symbols, cleaning and encoding, numbers and ARPAbet, and the
filelists the loader reads and the data step generates."""

import numpy as np
import pytest

from deploybench.models import fastpitch
from deploybench.models.fastpitch import data as fastpitch_data
from deploybench.models.fastpitch import text as fastpitch_text
from testkit.fastpitch import (
    LJS_LINES,
    TINY,
    data,  # noqa: F401 (a fixture)
)

# --- text and data ------------------------------------------------------------------

def test_english_basic_symbols_have_dles_ids():
    symbols = fastpitch_text.symbols("english_basic")
    assert len(symbols) == 148
    assert symbols[:12] == list("_-!'(),.:;? ")
    assert (symbols.index("A"), symbols.index("a"), symbols.index("z")) == (12, 38, 63)
    assert (symbols[64], symbols[106], symbols[147]) == ("@AA", "@HH", "@ZH")
    with pytest.raises(ValueError, match="unknown symbol set 'klingon'"):
        fastpitch_text.symbols("klingon")


@pytest.mark.parametrize("text, cleaned", [
    # expected strings: DLE's TextProcessing('english_basic', ['english_cleaners'])
    ("Mrs. De Mohrenschildt thought that Oswald,",
     "misess de mohrenschildt thought that oswald,"),
    ("In 1984 he paid $5.50 for 2 books.",
     "in nineteen eighty four he paid five dollars, fifty cents for two books."),
    ("The 21st of 1,000,000 and 2x3 rooms",
     "the twenty-first of one million and two by three rooms"),
    ("3.14 and 55%, 1500 and 2007",
     "three point fourteen and fifty five percent, fifteen hundred and two thousand seven"),
    ("Café “naïve” — Dr. Smith & Co.", "cafe naive -- doctor smith  company"),
    ("The 1920s, 101 and 1005; $2 million",
     "the nineteen twenties, one hundred and one and ten oh five; two dollars million"),
])
def test_text_is_cleaned_and_encoded_as_dle_does(text, cleaned):
    symbols = fastpitch_text.symbols("english_basic")
    ids = fastpitch_text.text_to_ids(text)
    assert "".join(symbols[i] for i in ids) == cleaned
    assert fastpitch_text.PAD_ID not in ids


def test_numbers_and_arpabet():
    assert fastpitch_text.cardinal(1234567) == ("one million, two hundred and thirty-four "
                                                "thousand, five hundred and sixty-seven")
    assert fastpitch_text.cardinal(2000005) == "two million and five"
    assert fastpitch_text.ordinal(112) == "one hundred and twelfth"
    assert fastpitch_text.ordinal(20) == "twentieth"
    assert fastpitch_text.text_to_ids("{HH AH0 L OW1} world") == [
        106, 73, 117, 123, 11, 60, 52, 55, 49, 41]


def test_filelist_loader_pads_cuts_and_counts(tmp_path):
    (tmp_path / "filelists").mkdir()
    (tmp_path / "filelists/ljs_audio_text_test_filelist.txt").write_text(
        "\n".join(LJS_LINES) + "\n\n")
    hp = {**TINY, "text_length": 64}
    inputs, (used, full) = fastpitch.load_split(hp, str(tmp_path), "test", None)
    ids, lengths = inputs
    assert ids.dtype == lengths.dtype == used.dtype == full.dtype == np.int64
    assert ids.shape == (3, 64) and lengths.shape == (3, 1)
    first = fastpitch_text.text_to_ids(LJS_LINES[0].split("|")[1])
    assert len(first) == 44 and full[0] == 44 and lengths[0, 0] == used[0] == 44
    np.testing.assert_array_equal(ids[0, :44], first)
    assert not ids[0, 44:].any()  # padded with the pad symbol 0
    assert list(full[1:] > 64) == [True, True] and list(used[1:]) == [64, 64]
    assert ids[1:].all()  # cut texts fill the row
    # max_samples keeps the file order; any filelist of DLE's formats by relative path
    (tmp_path / "mels.txt").write_text(
        "mels/LJ045-0096.pt|durations/LJ045-0096.pt|pitch_char/LJ045-0096.pt|"
        + LJS_LINES[0].split("|")[1] + "\n")
    mels, _ = fastpitch.load_split(hp, str(tmp_path), "mels.txt", 1)
    np.testing.assert_array_equal(mels[0], ids[:1])
    first_two, _ = fastpitch.load_split(hp, str(tmp_path), "test", 2)
    np.testing.assert_array_equal(first_two[0], ids[:2])
    # the npz the toolkit writes reads back without pickle
    np.savez(tmp_path / "eval.npz", *inputs, used, full)
    with np.load(tmp_path / "eval.npz", allow_pickle=False) as npz:
        assert [npz[k].dtype for k in npz.files] == [np.int64] * 4


def test_filelist_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="ljs_audio_text_val_filelist.txt"):
        fastpitch.load_split(TINY, str(tmp_path), "val", None)
    (tmp_path / "bad.txt").write_text(LJS_LINES[0] + "\njust text\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: expected '<path>\|...\|<text>'"):
        fastpitch.load_split(TINY, str(tmp_path), "bad.txt", None)


def test_generated_filelists(data, tmp_path):
    names = sorted(p.name for p in (data / "filelists").iterdir())
    assert names == sorted(fastpitch_data.FILELISTS.values())
    lines = (data / "filelists/ljs_audio_text_test_filelist.txt").read_text().splitlines()
    assert len(lines) == 24 and all(line.startswith("wavs/GEN003-") for line in lines)
    texts = [line.split("|")[1] for line in lines]
    assert len(set(texts)) == len(texts) and all(t.endswith(".") for t in texts)
    fastpitch.generate_dataset(TINY, str(tmp_path / "a"), seed=3, samples=24)
    fastpitch.generate_dataset(TINY, str(tmp_path / "b"), seed=4, samples=24)
    test_list = "filelists/ljs_audio_text_test_filelist.txt"
    assert (tmp_path / "a" / test_list).read_bytes() == (data / test_list).read_bytes()
    assert (tmp_path / "b" / test_list).read_bytes() != (data / test_list).read_bytes()


def test_perf_input_is_one_real_text_repeated_to_the_sequence_length(data):
    """As DLE's prepare_input_data.py: the first text's symbols, repeated and cut to
    text_length, whatever its own length (TINY's texts are cut at its text_length)."""
    inputs, _ = fastpitch.load_split(TINY, str(data), "test", None)
    text, length = fastpitch.perf_inputs(TINY, inputs)
    n, size = int(inputs[1][0, 0]), TINY["text_length"]
    assert text.shape == (1, size) and text.dtype == inputs[0].dtype
    assert length.tolist() == [[size]] and length.dtype == inputs[1].dtype
    assert (text[0] != 0).all()  # no padding symbol: real symbols all the way
    np.testing.assert_array_equal(text[0], np.tile(inputs[0][0, :n], size // n + 1)[:size])
    short = [inputs[0][:, :size], np.minimum(inputs[1], 3)]  # a 3-symbol text repeats
    assert fastpitch.perf_inputs(TINY, short)[0][0, :6].tolist() == short[0][0, :3].tolist() * 2
