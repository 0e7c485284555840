"""Small, linear text routines shared by clue building, uncertainty and verification.

Names are masked and leaks found with whole-word, case-insensitive matching; years and
numbers are read with the same regular expressions everywhere, so a clue built from a
page can always be checked against that page.
"""

from __future__ import annotations

import re
from typing import Iterable

from wiki_sim.focus import STOPWORDS, tokenize
from wiki_sim.sentences import NOT_AN_ABBREVIATION

_PAREN = re.compile(r"\s*\([^)]*\)$")
YEAR = re.compile(r"(?<![\d.,])(1[0-9]{3}|20[0-9]{2})(?!\d|,\d|\.\d)")
NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?!\w|,\d|\.\d)")
_SENTENCE_END = re.compile(r"(?<=[.!?])" + NOT_AN_ABBREVIATION + r"\s+(?=[A-Z0-9\"'(\[“])")
# Words too common in titles to give a page away on their own.
GENERIC_TITLE_WORDS = frozenset(
    "list history city river state university national international united kingdom county district "
    "people person film album song music language group company party church school college "
    "north south east west new great saint".split())


def display_title(title: str) -> str:
    """The title without a trailing parenthetical (``Mercury (planet)`` -> ``Mercury``)."""
    return _PAREN.sub("", title).strip() or title


def distinctive_words(name: str) -> list[str]:
    """Words of a name that give it away: three letters or more, not stopwords or generic."""
    return [w for w in tokenize(display_title(name)) if len(w) >= 3 and w not in GENERIC_TITLE_WORDS]


def _word_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    alternatives = sorted({w for w in words if w}, key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in alternatives) + r")(?!\w)", re.IGNORECASE)


def mask(text: str, names: Iterable[str], replacement: str) -> str:
    """``text`` with every whole-word occurrence of any of ``names`` replaced (longest first)."""
    pattern = _word_pattern(names)
    return pattern.sub(replacement, text) if pattern else text


def stem_leaks(text: str, words: Iterable[str]) -> list[str]:
    """Those ``words`` whose stem (first 6 letters, or the word if shorter) opens a word of ``text``."""
    found = []
    tokens = set(re.findall(r"\w+", text.lower()))
    for word in words:
        stem = word.lower()[:6]
        if any(t.startswith(stem) for t in tokens):
            found.append(word)
    return found


def leaks(text: str, phrases: Iterable[str], words: Iterable[str] = ()) -> list[str]:
    """Names (``phrases``, whole words) and distinctive ``words`` (by stem) that ``text`` contains."""
    found = [p for p in dict.fromkeys(phrases) if p and _word_pattern([p]).search(text)]
    return found + [w for w in stem_leaks(text, words) if w not in found]


def sentences(text: str) -> list[str]:
    """The sentences of a text (a simple splitter: end punctuation, space, capital)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def clause_around(sentence: str, marker: str, max_words: int = 30) -> str:
    """At most ``max_words`` words of ``sentence`` centred on ``marker`` (all of it when short)."""
    words = sentence.split()
    if len(words) <= max_words:
        return sentence.strip()
    at = next((i for i, w in enumerate(words) if marker in w), 0)
    start = max(0, min(at - max_words // 2, len(words) - max_words))
    piece = " ".join(words[start:start + max_words])
    return ("… " if start else "") + piece + (" …" if start + max_words < len(words) else "")


def content_words(text: str, limit: int = 6, exclude: Iterable[str] = ()) -> list[str]:
    """Up to ``limit`` of the longest content words of ``text`` (ties in text order), lower-cased."""
    skip = set(exclude)
    words = [w for w in dict.fromkeys(tokenize(text)) if len(w) >= 4 and not w.isdigit() and w not in skip
             and w not in STOPWORDS]
    ranked = sorted(range(len(words)), key=lambda i: (-len(words[i]), i))[:limit]
    return [words[i] for i in sorted(ranked)]


def years(text: str) -> list[int]:
    """Every year (1000-2099) written in ``text``."""
    return [int(m.group(1)) for m in YEAR.finditer(text)]


_SCALE = re.compile(r"\s+(thousand|million|billion|trillion)\b", re.I)
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}


def numbers(text: str) -> list[float]:
    """Every number written in ``text`` (thousands separators understood); a number a scale word follows
    counts as written and as a reader reads it ("2.04 million": 2.04 and 2,040,000)."""
    out = []
    for m in NUMBER.finditer(text):
        whole = m.group(1).replace(",", "")
        value = float(f"{whole}.{m.group(2)}") if m.group(2) else float(whole)
        out.append(value)
        scale = _SCALE.match(text, m.end())
        if scale:
            out.append(value * _SCALES[scale.group(1).lower()])
    return out


def article(phrase: str) -> str:
    """``a`` or ``an`` before a phrase."""
    low = phrase.lower()
    if low.startswith(("uni", "use", "usu", "uti", "eu", "one")):  # "a union", "a European", "a one-party"
        return "a"
    return "an" if low[:1] in "aeiou" else "a"
