"""How a page writes a name: qualified titles, mid-sentence mentions, and how often a page
writes its own title in each case (which tells a name from a common word, :mod:`.entity_links`).

Pure string routines, linear in the text; nothing here imports the rest of the ingest.
"""

from __future__ import annotations

import heapq
import re
from typing import Iterator

QUALIFIED = re.compile(r"^(.+?) \(([^()]+)\)$")
"""``Title (qualifier)``: the name and its disambiguator."""
_SENTENCE_START_SKIP = "\"'([“‘«*#-–— \t"


def lower_first(token: str) -> str:
    return token[:1].lower() + token[1:]


def sentence_start(text: str, start: int, limit: int = 12) -> bool:
    """Whether the word at ``start`` begins a sentence, line or text (quotes and brackets skipped)."""
    i = start - 1
    stop = max(-1, start - 1 - limit)
    while i > stop and text[i] in _SENTENCE_START_SKIP:
        i -= 1
    if i <= stop:
        return i < 0
    return text[i] in ".!?:;\n\r" or (text[i] == " " and i == 0)


def own_usage(title: str, text: str) -> tuple[int, int]:
    """``(capitalized, lower-case)``: how often ``text`` writes ``title`` (without its disambiguator)
    mid-sentence in each case. ``the Beatles`` counts as capitalized: only an all-lower-case
    mention is a common word's. Only the name as written and with its first letter lower-cased
    count, so those two are searched for (``str.find``, word-bounded, left to right without overlaps):
    no per-title regular expression, whose compiling cost about 150 us a title."""
    m = QUALIFIED.match(title)
    name = m.group(1) if m else title
    cap = lower = 0
    if not name or not text:
        return 0, 0
    end = -1
    for start, found in _word_bounded(text, (name, lower_first(name))):
        if start < end:  # overlaps the mention before it
            continue
        end = start + len(found)
        if sentence_start(text, start):
            continue
        if found.lower() == found:
            lower += 1
        else:
            cap += 1
    return cap, lower


def _word_bounded(text: str, forms: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """``(start, form)`` of every occurrence of each form in ``text`` that no word character
    (``\\w``: alphanumeric or ``_``) touches on either side, by start (streamed: a page naming
    itself millions of times holds no list of them)."""
    return heapq.merge(*(_occurrences(text, form) for form in dict.fromkeys(forms)))


def _occurrences(text: str, form: str) -> Iterator[tuple[int, str]]:
    i = text.find(form)
    while i >= 0:
        j = i + len(form)
        if not (i and _is_word(text[i - 1])) and not (j < len(text) and _is_word(text[j])):
            yield i, form
        i = text.find(form, i + 1)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
