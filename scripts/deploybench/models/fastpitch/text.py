"""FastPitch's text front end as DeepLearningExamples (DLE) runs it for LJSpeech:
`english_cleaners` and the `english_basic` symbol set (`common/text/` of its 2021 Triton
release), so a text maps to the symbol ids the published checkpoint was trained on.

`text_to_ids` follows DLE's `TextProcessing.encode_text` with its defaults (currency
expansion first, then the cleaners word by word, `{...}` groups read as ARPAbet, no
CMUdict look-up). Simplified, to need no third-party package:
  - ASCII transliteration: Unicode decomposition plus a table of common punctuation
    instead of `unidecode` (other non-ASCII characters are dropped);
  - numbers are spelled out by `cardinal`/`ordinal` here, which write what DLE's
    `inflect` calls write for the patterns `english_cleaners` expands, up to 10**18
    (larger integers are read digit by digit).
Expansions that DLE's cleaner order makes unreachable (roman numerals and "No." are
matched in upper case after lower-casing; "½" is transliterated before its rule) are
left out, so the output stays the same.
"""

from __future__ import annotations

import re
import unicodedata

# CMUdict's phone set (15 vowels with stress marks, 24 consonants), sorted like DLE's list.
_VOWELS = "AA AE AH AO AW AY EH ER EY IH IY OW OY UH UW".split()
_CONSONANTS = "B CH D DH F G HH JH K L M N NG P R S SH T TH V W Y Z ZH".split()
ARPABET = sorted([v + s for v in _VOWELS for s in ("", "0", "1", "2")] + _CONSONANTS)

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
SYMBOL_SETS = {
    # pad, special, punctuation, letters, then ARPAbet phones as "@AA" ...
    "english_basic": list("_" + "-" + "!'(),.:;? " + _LETTERS),
    "english_basic_lowercase": list("_" + "-" + "!'\"(),.:;? " + _LETTERS[26:]),
}
PAD_ID = 0  # "_" in both sets; never produced from text


def symbols(symbol_set: str) -> list[str]:
    if symbol_set not in SYMBOL_SETS:
        raise ValueError(f"unknown symbol set '{symbol_set}'; valid: "
                         + ", ".join(SYMBOL_SETS))
    return SYMBOL_SETS[symbol_set] + ["@" + s for s in ARPABET]


# --- numbers ------------------------------------------------------------------------

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ("", " thousand", " million", " billion", " trillion", " quadrillion",
           " quintillion")


def _below_hundred(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def _below_thousand(n: int, andword: str) -> str:
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        return _below_hundred(rest)
    words = f"{_ONES[hundreds]} hundred"
    if rest:
        words += f" {andword} " if andword else " "
        words += _below_hundred(rest)
    return words


def cardinal(n: int, andword: str = "and") -> str:
    """inflect's number_to_words(n, andword=...): groups of three joined by ", ", the
    last by " and " when it is below a hundred ("one thousand and five")."""
    if n < 0:
        return "minus " + cardinal(-n, andword)
    if n == 0:
        return "zero"
    if n >= 10 ** (3 * len(_SCALES)):
        return " ".join(_ONES[int(d)] for d in str(n))
    groups = []
    scale = 0
    while n:
        n, group = divmod(n, 1000)
        if group:
            groups.append((scale, group))
        scale += 1
    groups.reverse()
    words = ""
    for i, (scale, group) in enumerate(groups):
        if i:
            last_small = scale == 0 and group < 100
            words += (f" {andword} " if andword else " ") if last_small else ", "
        words += _below_thousand(group, andword) + _SCALES[scale]
    return words


_ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                  "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}


def ordinal(n: int) -> str:
    """inflect's ordinal words: 21 -> "twenty-first", 1000 -> "one thousandth"."""
    words = cardinal(n)
    head, last = re.match(r"(.*?)([a-z]+)$", words).groups()
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + last


def _decimal(text: str) -> str:
    """inflect's reading of "1.25": "one point two five"."""
    whole, _, fraction = text.partition(".")
    words = cardinal(int(whole or 0))
    if fraction:
        words += " point " + " ".join(_ONES[int(d)] for d in fraction)
    return words


def _year_pairs(n: int) -> str:
    """inflect's number_to_words(n, andword='', zero='oh', group=2) for 1000-9999,
    as DLE then cleans it: "nineteen eighty four", "ten oh one"."""
    pairs = []
    for pair in divmod(n, 100):
        if pair == 0:
            pairs.append("oh oh")
        elif pair < 10:
            pairs.append(f"oh {_ONES[pair]}")
        else:
            pairs.append(_below_hundred(pair))
    return " ".join(pairs).replace("-", " ")


_MAGNITUDES = ("trillion", "billion", "million", "thousand", "hundred", "m", "b", "t")
_MAGNITUDE_WORDS = {"m": "million", "b": "billion", "t": "trillion"}
_CURRENCIES = {"$": "dollar", "£": "pound", "€": "euro", "₩": "won"}
_currency_re = re.compile(r"([\$€£₩])([0-9\.\,]*[0-9]+)(?:[ ]?({})(?=[^a-zA-Z]))?".format(
    "|".join(_MAGNITUDES)), re.IGNORECASE)
_comma_number_re = re.compile(r"([0-9][0-9\,]+[0-9])")
_decimal_number_re = re.compile(r"([0-9]+\.[0-9]+)")
_ordinal_re = re.compile(r"[0-9]+(st|nd|rd|th)")
_multiply_re = re.compile(r"(\b[0-9]+)(x)([0-9]+)")
_number_re = re.compile(r"[0-9]+'s|[0-9]+s|[0-9]+")


def _hundreds(quantity: str) -> str:
    """DLE's _expand_hundreds: 1500 -> "fifteen hundred", else the plain reading."""
    number = float(quantity)
    if 1000 < number < 10000 and number % 100 == 0 and number % 1000 != 0:
        return cardinal(int(number) // 100) + " hundred"
    return _decimal(quantity) if "." in quantity else cardinal(int(quantity))


def _expand_currency(m: re.Match) -> str:
    unit = _CURRENCIES[m.group(1)]
    quantity, magnitude = m.group(2).replace(",", ""), m.group(3)
    if magnitude is not None:
        magnitude = _MAGNITUDE_WORDS.get(magnitude.lower(), magnitude)
        return f"{_hundreds(quantity)} {magnitude} {unit}s"
    parts = quantity.split(".")
    if len(parts) > 2:
        return f"{quantity} {unit}s"
    whole = int(parts[0]) if parts[0] else 0
    cents = int(parts[1]) if len(parts) > 1 and parts[1] else 0
    whole_words = f"{_hundreds(str(whole))} {unit if whole == 1 else unit + 's'}"
    cent_words = f"{cardinal(cents)} {'cent' if cents == 1 else 'cents'}"
    if whole and cents:
        return f"{whole_words}, {cent_words}"
    if whole:
        return whole_words
    if cents:
        return cent_words
    return f"zero {unit}s"


def _expand_number(m: re.Match) -> str:
    """DLE's _expand_number, including its reading of years (1001-2999)."""
    digits = re.match(r"[0-9]+", m.group(0)).group(0)
    suffix = m.group(0)[len(digits):]
    number = int(digits)
    if number > 1000 and number % 100 == 0 and number % 1000 != 0:
        text = cardinal(number // 100) + " hundred"  # hyphens kept, as in DLE
    elif 1000 < number < 3000:
        if number == 2000:
            text = "two thousand"
        elif 2000 < number < 2010:
            text = "two thousand " + cardinal(number % 100)
        else:
            text = _year_pairs(number)
    else:
        text = cardinal(number).replace("-", " ").replace(",", "")
    if suffix in ("'s", "s"):
        text = text[:-1] + "ies" if text.endswith("y") else text + suffix
    return text


def expand_numbers(text: str) -> str:
    text = _comma_number_re.sub(lambda m: m.group(1).replace(",", ""), text)
    text = _currency_re.sub(_expand_currency, text)
    text = _decimal_number_re.sub(lambda m: m.group(1).replace(".", " point "), text)
    text = _ordinal_re.sub(lambda m: ordinal(int(m.group(0)[:-2])), text)
    text = _multiply_re.sub(lambda m: f"{m.group(1)} by {m.group(3)}", text)
    return _number_re.sub(_expand_number, text)


# --- cleaners -----------------------------------------------------------------------

_ABBREVIATIONS = [(re.compile(rf"\b{short}\.", re.IGNORECASE), full) for short, full in (
    ("mrs", "misess"), ("ms", "miss"), ("mr", "mister"), ("dr", "doctor"), ("st", "saint"),
    ("co", "company"), ("jr", "junior"), ("maj", "major"), ("gen", "general"),
    ("drs", "doctors"), ("rev", "reverend"), ("lt", "lieutenant"), ("hon", "honorable"),
    ("sgt", "sergeant"), ("capt", "captain"), ("esq", "esquire"), ("ltd", "limited"),
    ("col", "colonel"), ("ft", "fort"), ("sen", "senator"),
)]
_percent_re = re.compile(r"([ ]?[%])")

# What unidecode writes for characters that do not decompose to ASCII.
_ASCII = str.maketrans({
    "‘": "'", "’": "'", "‚": ",", "“": '"', "”": '"', "„": ",,", "–": "-", "—": "--",
    "…": "...", "«": "<<", "»": ">>", "×": "x", "½": " 1/2", "¼": " 1/4", "¾": " 3/4",
    "£": "PS", "€": "EUR", "°": "deg", "ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe",
    "Œ": "OE", "ø": "o", "Ø": "O", "¿": "?", "¡": "!", "\u00a0": " ",
})


def to_ascii(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.translate(_ASCII))
    return text.encode("ascii", "ignore").decode("ascii")


def expand_abbreviations(text: str) -> str:
    text = _percent_re.sub(" percent", text)
    for regex, full in _ABBREVIATIONS:
        text = regex.sub(full, text)
    return text


def english_cleaners(text: str) -> str:
    """ASCII, lower case, numbers and abbreviations spelled out, whitespace collapsed."""
    text = expand_numbers(to_ascii(text).lower())
    return re.sub(r"\s+", " ", expand_abbreviations(text))


_arpa_re = re.compile(r"{[^}]+}|\S+")
_curly_re = re.compile(r"(.*?)\{(.+?)\}(.*)")


def text_to_ids(text: str, symbol_set: str = "english_basic") -> list[int]:
    """Symbol ids of a raw text, as DLE's TextProcessing.encode_text gives them;
    characters outside the symbol set are dropped."""
    ids = {s: i for i, s in enumerate(symbols(symbol_set))}
    text = _currency_re.sub(_expand_currency, text)
    text = " ".join(part if part[0] == "{" else english_cleaners(part)
                    for part in _arpa_re.findall(text))
    sequence = []
    while text:
        m = _curly_re.match(text)
        plain, phones, text = (text, "", "") if m is None else m.groups()
        sequence += [ids[c] for c in plain if c in ids]
        sequence += [ids["@" + p] for p in phones.split() if "@" + p in ids]
    return sequence
