"""Sentence spans of a page's text, and the sentence that carries each link.

Used at build time (:class:`~wiki_sim.store.StoreWriter` stores, for every link, the
offsets of the source page's sentence that names it) and by synthesis (dated and numeric
statements are sentences too). Everything here is linear in the text: one regex pass for
the sentence ends, one forward scan for the anchors.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Iterable

NOT_AN_ABBREVIATION = (r"(?<!\b[A-HJ-UWYZ]\.)(?<!\b(?:Dr|Mr|Ms|St|Jr|Sr|Mt|No|vs|ca|Co)\.)"
                       r"(?<!\bMrs\.)(?<!\bc\.)")
"""A full stop that ends no sentence: after an initial (``J. R. R. Tolkien``, ``John F. Kennedy``;
not I, V or X, which end sentences as numerals: ``World War I.``) or a common abbreviation
(``St. Louis``, ``Dr.``, ``c. 1200``). Every sentence splitter of the project uses it."""
# A sentence ends at . ! ? followed by space and a capital, digit, quote or bracket, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])" + NOT_AN_ABBREVIATION + r"[ \t]+(?=[A-Z0-9\"'(\[])|\n+")
MAX_SENTENCE_CHARS = 600
"""A "sentence" longer than this (a table row, a list without full stops) is cut to a
window of this many characters around the anchor."""


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``, in order, blank ones left out."""
    spans = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if text[start:m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def _window(text: str, start: int, end: int, a_start: int, a_end: int, limit: int) -> tuple[int, int]:
    """Cut span ``[start, end)`` to at most ``limit`` characters around ``[a_start, a_end)``, at spaces."""
    if end - start <= limit:
        return start, end
    half = max(0, (limit - (a_end - a_start)) // 2)
    lo, hi = max(start, a_start - half), min(end, a_end + half)
    if lo > start:
        space = text.find(" ", lo, a_start)
        lo = space + 1 if space >= 0 else lo
    if hi < end:
        space = text.rfind(" ", a_end, hi)
        hi = space if space >= 0 else hi
    return lo, hi


def locate_spans(text: str, anchors: Iterable[tuple[int, int]],
                 limit: int = MAX_SENTENCE_CHARS) -> list[tuple[int, int]]:
    """For each anchor at known offsets ``(start, end)``, the sentence of ``text`` that holds it."""
    spans = sentence_spans(text)
    starts = [s for s, _ in spans]
    out = []
    for a_start, a_end in anchors:
        if not spans or not 0 <= a_start < a_end <= len(text):
            out.append((0, 0))
            continue
        i = max(0, bisect_right(starts, a_start) - 1)
        s, e = spans[i]
        out.append(_window(text, s, max(e, a_end), a_start, a_end, limit))
    return out


def locate_anchors(text: str, anchors: Iterable[str], limit: int = MAX_SENTENCE_CHARS) -> list[tuple[int, int]]:
    """For each anchor, in order, the ``(start, end)`` of the sentence of ``text`` that shows it.

    Links come in reading order, so each anchor is looked for after the previous one
    found; an anchor not there (an infobox value, a link out of order) is looked for from
    the top without moving on. ``(0, 0)`` when the anchor is not in the text at all.
    """
    spans = sentence_spans(text)
    starts = [s for s, _ in spans]
    out = []
    cursor = 0
    first: dict[str, int] = {}
    for anchor in anchors:
        pos = text.find(anchor, cursor) if anchor else -1
        if pos >= 0:
            cursor = pos + len(anchor)
        elif anchor:
            if anchor not in first:  # each distinct anchor is searched from the top once
                first[anchor] = text.find(anchor)
            pos = first[anchor]
        if pos < 0 or not spans:
            out.append((0, 0))
            continue
        i = max(0, bisect_right(starts, pos) - 1)
        s, e = spans[i]
        out.append(_window(text, s, max(e, min(len(text), pos + len(anchor))), pos, pos + len(anchor), limit))
    return out
