"""Text analysis for the index: one fused tokenizer/stopper/stemmer, and a field that uses it fast.

Whoosh's ``StemmingAnalyzer`` chains a tokenizer and three filters as generators, one
Python call per token per stage; over a corpus that is most of the indexing time. The
:class:`WikiAnalyzer` does the same job (word tokens, lower case, English stopwords
dropped, Porter stems) in one pass with a stem cache, and
:class:`WikiText` counts a document's terms with it directly instead of through token
objects. Queries go through the same analyzer, so index and query terms always agree.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from whoosh import formats
from whoosh.analysis import Analyzer, Token
from whoosh.analysis.filters import STOP_WORDS
from whoosh.fields import TEXT
from whoosh.lang.porter import stem as porter_stem
from whoosh.system import pack_uint

TOKEN_PATTERN = re.compile(r"\w+(?:\.?\w+)*", re.UNICODE)
# Whoosh's English stopwords, plus the tails of contractions and possessives ("Newton's",
# "don't"): one-character words are kept (``Vitamin C``, ``Type 1``, ``3 million``), these
# few are not (they would match most pages).
STOPWORDS = STOP_WORDS | frozenset({"s", "t", "d", "m", "ll", "re", "ve"})


@lru_cache(maxsize=500_000)
def stem_word(word: str) -> str | None:
    """The index term for a word token (any case), or ``None`` for a stopword.

    Tokens are cut before lower-casing: lower-casing can add combining marks (``"İ"``)."""
    word = word.lower()
    if word in STOPWORDS:
        return None
    return porter_stem(word)


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` in order (stopwords dropped)."""
    return [t for t in map(stem_word, TOKEN_PATTERN.findall(text)) if t is not None]


class WikiAnalyzer(Analyzer):
    """Word tokens, lower-cased, stopwords removed, Porter-stemmed.

    Equivalent to Whoosh's ``StemmingAnalyzer(stoplist=STOPWORDS, minsize=1)`` (without
    its wildcard characters), in one generator. Positions count kept tokens only, as ``StopFilter(renumber=True)`` does.
    """

    def __eq__(self, other):
        return self.__class__ is other.__class__

    def __hash__(self):
        return hash(self.__class__.__name__)

    def __call__(self, value, positions=False, chars=False, keeporiginal=False, removestops=True,
                 start_pos=0, start_char=0, tokenize=True, mode="", **kwargs):
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        t.boost = 1.0
        t.stopped = False
        if not tokenize:
            term = stem_word(value)
            if term is not None:
                t.original = value
                t.text = term
                if positions:
                    t.pos = start_pos
                if chars:
                    t.startchar, t.endchar = start_char, start_char + len(value)
                yield t
            return
        pos = start_pos
        for match in TOKEN_PATTERN.finditer(value):
            word = match.group()
            term = stem_word(word)
            if term is None:
                continue
            t.text = term
            if keeporiginal:
                t.original = word
            if positions:
                t.pos = pos
                pos += 1
            if chars:
                t.startchar, t.endchar = start_char + match.start(), start_char + match.end()
            yield t


class WikiText(TEXT):
    """A TEXT field that counts terms with :func:`analyze` when indexing (no positions)."""

    def __init__(self, field_boost: float = 1.0, stored: bool = False):
        super().__init__(analyzer=WikiAnalyzer(), phrase=False, stored=stored, field_boost=field_boost)

    def index(self, value, **kwargs):
        if not isinstance(self.format, formats.Frequency) or not isinstance(value, str):
            yield from super().index(value, **kwargs)
            return
        boost = self.format.field_boost
        for term, freq in Counter(analyze(value)).items():
            yield term.encode("utf-8"), freq, freq * boost, pack_uint(freq)
