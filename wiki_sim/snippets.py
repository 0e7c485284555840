"""Search-result snippets: the window of a page holding the most query weight.

Whoosh's highlighter stops looking after 32K characters of a document, so a match deep in
a long article would give no snippet. Here every word of the page whose index term is a
query term is located with one regular expression (C speed), and the ``width``-character
window with the highest weight (idf of the distinct query terms it holds, plus a little per
repeat) becomes the snippet, wherever it lies in the article.
"""

from __future__ import annotations

import re
from functools import lru_cache

from wiki_sim.analysis import stem_word

_HEADING_MARK = re.compile(r"(?m)^#{1,6}[ \t]*")
_SPACES = re.compile(r"\s+")
REPEAT_BONUS = 0.05


def _prefixes(terms: tuple[str, ...]) -> list[str]:
    """The word starts that may stem to one of ``terms``: Porter stemming rewrites only a word's
    ending, and at most the stem's last letter differs from the word (``city`` -> ``citi``), so
    every word starting with a stem minus its last letter is a candidate. (Over the default corpus
    and the gensim sample, 9 of 70,000 distinct words break this: a few Porter oddities and words
    whose lower case gains a letter, like ``İzmir``.)"""
    return sorted({t[:-1] if len(t) >= 3 else t for t in terms})


@lru_cache(maxsize=4096)
def _candidates_for(terms: tuple[str, ...]) -> re.Pattern[str]:
    """Words that start with one of :func:`_prefixes`, case-insensitively."""
    prefixes = _prefixes(terms)
    alternatives = "|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True))
    return re.compile(r"(?<!\w)(?:" + alternatives + r")\w*", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _ascii_prefixes(terms: tuple[str, ...]) -> tuple[str, ...] | None:
    """:func:`_candidates_for`'s prefixes, lower case; ``None`` when one is empty or not ASCII."""
    prefixes = tuple(_prefixes(terms))
    return prefixes if all(p and p.isascii() and p == p.lower() for p in prefixes) else None


_WORD_TAIL = re.compile(r"\w*")
FIND_MAX_CHARS = 100_000
"""Longer texts are matched with the compiled pattern: ``str.find`` stops at every occurrence of a prefix,
inside words too (a one-letter term in a 10 MB page: a million Python steps), the pattern only at word starts."""
CASE_ODDITIES = ("\u0130", "\u0131", "\u017f", "\u212a")
"""The only characters that ``re.IGNORECASE`` matches to an ASCII letter other than its two cases
(İ, ı, ſ, K), and the only ones whose ``lower()`` is ASCII or longer than one character."""


def _word_starts(text: str, prefixes: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of every word of ``text`` that starts with one of the lower-case ASCII ``prefixes``,
    case-insensitively: what ``_candidates_for(...).finditer(text)`` finds, by ``str.find`` on the lower-case
    text (no pattern compiled per query). Call only when ``text`` holds none of :data:`CASE_ODDITIES`: then
    ``text.lower()`` keeps every offset, and a match in it is a case-insensitive match in ``text``."""
    low = text.lower()
    longest: dict[int, int] = {}
    for prefix in prefixes:
        i = low.find(prefix)
        while i != -1:
            before = text[i - 1] if i else " "
            if not (before.isalnum() or before == "_") and longest.get(i, 0) < len(prefix):
                longest[i] = len(prefix)
            i = low.find(prefix, i + 1)
    spans, end = [], 0
    for start in sorted(longest):
        if start >= end:  # a match never starts inside the one before (as ``finditer`` resumes at its end)
            end = _WORD_TAIL.match(text, start + longest[start]).end()
            spans.append((start, end))
    return spans


def find_matches(text: str, weights: dict[str, float]) -> list[tuple[int, int, str]]:
    """(start, end, term) of every word in ``text`` whose index term is in ``weights``."""
    if not weights or not text:
        return []
    terms = tuple(sorted(weights))
    prefixes = _ascii_prefixes(terms)
    if prefixes is not None and len(text) <= FIND_MAX_CHARS and not any(c in text for c in CASE_ODDITIES):
        spans = _word_starts(text, prefixes)
    else:
        spans = [m.span() for m in _candidates_for(terms).finditer(text)]
    matches = []
    for start, end in spans:
        term = stem_word(text[start:end])
        if term in weights:
            matches.append((start, end, term))
    return matches


def best_window(matches: list[tuple[int, int, str]], weights: dict[str, float], width: int) -> tuple[int, int]:
    """The (start, end) span of matches, at most ``width`` long, with the highest weight."""
    best, span = -1.0, (matches[0][0], matches[0][1])
    counts: dict[str, int] = {}
    distinct = 0.0
    j = 0
    for i, (start, end, _) in enumerate(matches):
        if j <= i:  # the window is empty: restart it at match i
            j = i
        while j < len(matches) and matches[j][1] - start <= width:
            term = matches[j][2]
            counts[term] = counts.get(term, 0) + 1
            if counts[term] == 1:
                distinct += weights[term]
            j += 1
        if j > i:
            score = distinct + REPEAT_BONUS * (j - i)
            if score > best:
                best, span = score, (start, matches[j - 1][1])
            term = matches[i][2]
            counts[term] -= 1
            if counts[term] == 0:
                distinct -= weights[term]
        elif best < 0:  # a single match longer than the window
            best, span = 0.0, (start, end)
    return span


def clip(text: str, start: int, end: int, width: int) -> str:
    """``text[start:end]`` widened evenly to about ``width`` characters, cut at spaces,
    headings' ``#`` marks and line breaks flattened; ``...`` marks a cut."""
    pad = max(0, width - (end - start))
    lo = max(0, start - pad // 2)
    hi = min(len(text), max(end, lo + width))
    lo = max(0, min(lo, hi - width))
    if lo > 0:
        space = text.find(" ", lo, max(lo, start))
        lo = space + 1 if space != -1 else lo
    if hi < len(text):
        space = text.rfind(" ", end, hi)
        hi = space if space != -1 else hi
    piece = _SPACES.sub(" ", _HEADING_MARK.sub("", text[lo:hi])).strip()
    return ("... " if lo > 0 else "") + piece + (" ..." if hi < len(text) else "")


def best_snippet(text: str, weights: dict[str, float], width: int = 300) -> str:
    """About ``width`` characters of ``text`` around its best-matching window for a query
    whose index terms have ``weights``; the text's beginning when nothing matches."""
    matches = find_matches(text, weights)
    if not matches:
        return clip(text, 0, min(len(text), width), width)
    return clip(text, *best_window(matches, weights, width), width)
