"""Derive wikilinks for plain-text corpora by finding other articles' titles in the text.

The embedded default corpus has lead sections but no links. :class:`LinkFinder` tokenizes
each text (words and single punctuation marks, so ``Washington, D.C.`` and ``AC/DC`` are
token sequences too) and scans it once, trying at each token the longest title that starts
there (longest match first), then moving past the match. Rules:

- a title matches with its first letter in either case (MediaWiki titles are
  case-insensitive in the first letter only: ``water`` finds *Water*, ``the Beatles``
  finds *The Beatles*); the rest must match exactly;
- a title ``X (qualifier)`` can also be found as ``X``, but only when that is
  unambiguous: no article is titled ``X`` and no other article is ``X (something else)``.
  Such derived aliases match case-sensitively (``Mercury`` but not ``mercury``);
- titles that are only digits/punctuation or shorter than ``min_chars`` are never
  searched for. A one-word title is found in lower case (``water``) only if that word
  is not an everyday word: not in more than ``max_df`` of the corpus's texts
  (:meth:`LinkFinder.drop_common_words`), and not one of a few words whose lower-case use
  is rarely the article (``well``, ``second``, ``lead``, ...);
- a match glued to a hyphenated word (``Austria`` in ``Austria-Hungary``) is not a link;
- a page never links to itself, and each target is linked once per page (its first
  occurrence), as Wikipedia's style guide asks.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Mapping

from wiki_sim.ingest.name_usage import QUALIFIED, lower_first

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"\w+")
_NOT_A_NAME = re.compile(r"^[\d\W_]+$")
COMMON_NOUN_MIN_DF = 3
# Lower-case words that are titles in the vital-articles list but in running text are
# usually a verb, a modal or an adjective, not the article's subject.
LOWERCASE_STOP = frozenset(
    "lie will may saw fly fat bit set can must might pet ton van bay bar sin play order state matter work line "
    "time form type kind case point well second name public square white black red green head home sense "
    "addition past present interest lead stable court hand male female average combination experience property "
    "volume year father mother solid plant ruler mass rights range scale field power record".split())



class LinkFinder:
    """Find known titles (and unambiguous short forms) in text, longest match first."""

    def __init__(self, titles: Iterable[str], aliases: Mapping[str, str] | None = None, *,
                 min_chars: int = 3, max_tokens: int = 12):
        titles = list(dict.fromkeys(titles))
        title_set = set(titles)
        self.table: dict[tuple[str, ...], str] = {}
        self.starts: dict[str, list[int]] = {}
        self.derived: set[tuple[str, ...]] = set()
        """Keys of derived short forms (``Mercury`` for ``Mercury (planet)``)."""
        self.bare: set[tuple[str, ...]] = set()
        """One-word keys that do not match inside a longer capitalized name (``Freddie Mercury``)."""
        self._min_chars, self._max_tokens = min_chars, max_tokens
        # Exact (case-sensitive) names first; a real title then displaces a derived short form.
        exact = {a: t for a, t in (aliases or {}).items() if a not in title_set and t in title_set}
        exact.update(self._short_forms(titles, title_set))
        for name, target in exact.items():
            self._add(name, target, first_letter_free=False)
        for title in titles:
            self._add(title, title, first_letter_free=True)
        for first, lengths in self.starts.items():
            self.starts[first] = sorted(set(lengths), reverse=True)

    @staticmethod
    def _short_forms(titles: list[str], title_set: set[str]) -> dict[str, str]:
        """``'Mercury (planet)'`` -> ``{'Mercury': 'Mercury (planet)'}`` when unambiguous."""
        by_base: dict[str, list[str]] = {}
        for t in titles:
            m = QUALIFIED.match(t)
            if m:
                by_base.setdefault(m.group(1), []).append(t)
        return {base: ts[0] for base, ts in by_base.items() if len(ts) == 1 and base not in title_set}

    def _add(self, name: str, target: str, first_letter_free: bool) -> None:
        if len(name) < self._min_chars or _NOT_A_NAME.match(name):
            return
        tokens = tuple(_TOKEN.findall(name))
        if not tokens or len(tokens) > self._max_tokens:
            return
        keys = [tokens]
        lowered = (lower_first(tokens[0]),) + tokens[1:]
        if first_letter_free and lowered != tokens:
            if len(tokens) == 1 and lowered[0] in LOWERCASE_STOP:
                self.bare.add(tokens)
            else:
                keys.append(lowered)
        for key in keys:
            if key in self.table and not (first_letter_free and key in self.derived):
                continue  # first come wins
            self.table[key] = target
            self.derived.discard(key)
            if not first_letter_free:
                self.derived.add(key)
                if len(key) == 1:
                    self.bare.add(key)
            self.starts.setdefault(key[0], []).append(len(key))

    def drop_common_words(self, texts: list[str], max_df: float = 0.02) -> list[str]:
        """Stop linking everyday words: one-word keys found in more than ``max_df`` of ``texts``.

        A lower-case title word (``city``, ``family``, ``history``) is not worth a link each
        time it appears (Wikipedia's guideline against overlinking); its capitalized form
        still links, but not inside a longer name (``Amazon River``). A derived short form
        that common (``Western`` for *Western (genre)*) is mostly something else: dropped.
        Returns the keys dropped.
        """
        candidates = {k[0] for k in self.table if len(k) == 1 and (k[0][:1].islower() or k in self.derived)}
        df: Counter[str] = Counter()
        for text in texts:
            df.update({w for w in _WORD.findall(text) if w in candidates})
        limit = max_df * len(texts)
        dropped = sorted(w for w, c in df.items() if c > limit)
        for w in dropped:
            del self.table[(w,)]
        for w, c in df.items():
            # A title that is also a common noun in this corpus ("river") is, capitalized
            # inside a longer name ("Amazon River"), part of that name, not the article.
            if c >= COMMON_NOUN_MIN_DF and (w,) not in self.derived:
                self.bare.add((w[:1].upper() + w[1:],))
        return dropped

    def find(self, text: str, self_title: str = "") -> list[tuple[str, str]]:
        """``(target title, anchor text)`` for the first occurrence of each known title in ``text``."""
        tokens = _TOKEN.findall(text)
        starts = self.starts
        # Only tokens that begin some name need work; the scan skips the rest in C.
        candidates = [i for i, t in enumerate(tokens) if t in starts]
        if not candidates:
            return []
        spans: list[tuple[int, int]] | None = None
        found: list[tuple[str, str]] = []
        seen = {self_title}
        n, resume = len(tokens), 0
        for i in candidates:
            if i < resume:
                continue  # inside the previous match
            for length in starts[tokens[i]]:
                if i + length > n:
                    continue
                key = tuple(tokens[i:i + length])
                target = self.table.get(key)
                if target is None:
                    continue
                if spans is None:
                    spans = [m.span() for m in _TOKEN.finditer(text)]
                start, end = spans[i][0], spans[i + length - 1][1]
                if _hyphen_glued(text, start, end) or key in self.bare and _inside_name(tokens, i):
                    continue
                resume = i + length
                if target not in seen:
                    seen.add(target)
                    found.append((target, text[start:end]))
                break
        return found


def _cap(tokens: list[str], i: int) -> bool:
    return 0 <= i < len(tokens) and tokens[i][:1].isupper()


def _inside_name(tokens: list[str], i: int) -> bool:
    """Whether the word at ``i`` is part of a longer capitalized name: ``Amazon River``,
    ``Republic of Ireland``, ``People's Republic``."""
    if _cap(tokens, i - 1) or _cap(tokens, i + 1):
        return True
    if i >= 3 and tokens[i - 1] == "s" and tokens[i - 2] in ("'", "’") and _cap(tokens, i - 3):
        return True
    return i + 2 < len(tokens) and tokens[i + 1] == "of" and _cap(tokens, i + 2)


def _hyphen_glued(text: str, start: int, end: int) -> bool:
    before = start >= 2 and text[start - 1] == "-" and text[start - 2].isalnum()
    after = end + 1 < len(text) and text[end] == "-" and text[end + 1].isalnum()
    return before or after
