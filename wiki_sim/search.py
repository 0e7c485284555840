"""Search as a person expects it, on top of either engine's BM25 candidates.

An engine (the Whoosh index, or tantivy) ranks pages by BM25 over title, aliases and body.
This layer re-ranks its top :data:`RERANK_DEPTH` candidates, with their titles and their
term sequences (the forward index, :mod:`wiki_sim.forward`):

- a page whose title is the query (or nearly: the query holds the title's words, or the
  title the query's) rises by up to the best candidate's score, so ``Albert Einstein``
  finds Albert Einstein first, not Albert Ellis;
- query words that stand next to each other in the page or its title (a phrase,
  stopwords between allowed) rank it above pages where they lie scattered;
- a query word no page holds is replaced by the indexed word closest in spelling
  (``Einstien`` -> ``einstein``), and the result says so (``corrected_query``).

Only the final hits are read from the store (for the url and the snippet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, Sequence

import numpy as np

from wiki_sim.analysis import TOKEN_PATTERN, analyze, stem_word
from wiki_sim.forward import LazyForwardIndex
from wiki_sim.index import query_terms
from wiki_sim.snippets import best_snippet, find_matches

# Candidates re-ranked per query (the engine's top BM25 pages).
RERANK_DEPTH = 40
# Weights of the two bonuses, as fractions of the best candidate's BM25 score.
TITLE_WEIGHT = 1.0
PROXIMITY_WEIGHT = 0.5
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


SUGGEST_MAX_LETTERS = 40
"""Longest unknown word given a spelling suggestion (English words and names stay far below)."""


class Engine(Protocol):
    """What the search layer needs from an index."""

    titles: list[str]  # by document number (the store's page order)

    def candidates(self, terms: list[str], n: int) -> list[tuple[int, float]]: ...
    def known(self, term: str) -> bool: ...
    def idf(self, term: str) -> float: ...
    def suggest(self, term: str) -> str | None: ...
    def doc_count(self) -> int: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Hit:
    """One search result."""

    title: str
    url: str
    snippet: str
    score: float = 0.0


class SearchResults(list):
    """A query's hits (a list of :class:`Hit`), with the spelling-corrected query when
    some query word matched no page and was replaced (``None`` otherwise)."""

    corrected_query: str | None = None


@lru_cache(maxsize=4096)
def title_terms(title: str) -> tuple[frozenset[str], frozenset[str]]:
    """The index terms of a title, with and without its trailing parenthetical (cached for
    the titles most recently ranked: about 0.7 KB each, per process)."""
    full = frozenset(analyze(title))
    return full, frozenset(analyze(_PAREN.sub("", title))) or full


def title_similarity(query: set[str], title: str) -> float:
    """How nearly a query is a title: 1 for the same words (the title's parenthetical
    optional); 0.5 when one side holds all of the other's words, at least two, and at
    most one more; else 0. (Partial overlaps get nothing: keyword queries often hold a
    word that is some other page's whole title, "empire", "river".)"""
    full, short = title_terms(title)
    if not full or not query:
        return 0.0
    if query == full or query == short:
        return 1.0
    for words in (full, short):
        common = len(query & words)
        if common >= 2 and (common == len(words) or common == len(query)) \
                and abs(len(query) - len(words)) <= 1:
            return 0.5
    return 0.0


def proximity(sequences: list[np.ndarray], query_ids: np.ndarray, n_terms: int) -> np.ndarray:
    """For each page's term-id array, the share of a query's possible adjacent pairs
    (``n_terms - 1``) found there: distinct pairs of different query terms next to each
    other (stopwords between them allowed). ``query_ids`` are the query terms' ids. All
    pages at once, in a few array operations whose size is the pages' and the query's, never
    the vocabulary's: (pages,) -> (pages,)."""
    out = np.zeros(len(sequences))
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    query_ids = np.unique(np.asarray(query_ids, dtype=np.int64))  # sorted, for the binary search below
    if n_terms < 2 or len(query_ids) < 2 or lengths.sum() < 2:
        return out
    seq = np.concatenate(sequences).astype(np.int64)
    page = np.repeat(np.arange(len(sequences)), lengths)
    rank = np.minimum(np.searchsorted(query_ids, seq), len(query_ids) - 1)  # a term's place among the query's
    hit = query_ids[rank] == seq
    left, right = rank[:-1], rank[1:]
    both = hit[:-1] & hit[1:] & (left != right) & (page[:-1] == page[1:])
    if not both.any():
        return out
    a, b, p = left[both], right[both], page[:-1][both]
    size = len(query_ids)
    pairs = np.unique((p * size + np.minimum(a, b)) * size + np.maximum(a, b))
    counts = np.bincount(pairs // (size * size), minlength=len(sequences))
    return np.minimum(1.0, counts / (n_terms - 1))


def rerank(candidates: list[tuple[int, float]], titles: Sequence[str], forward: Any, texts: dict[int, str],
           terms: list[str]) -> list[tuple[int, float]]:
    """Candidates (docnum, score) re-scored with the title and proximity bonuses, best
    first (stable). ``forward`` gives each page's term ids (``texts``: for a lazy one).
    The work is in the query's and the candidates' sizes (not the vocabulary's)."""
    if not candidates:
        return []
    top = max(score for _, score in candidates)
    query = set(terms)
    names = [titles[doc] for doc, _ in candidates]  # a memory-mapped table decodes on every read: once each
    near = np.zeros(len(candidates))
    if len(terms) > 1:  # a lazy forward index assigns the ids of new terms as it goes: sequences first
        sequences = [forward.sequence(doc, name, texts.get(doc, "")) for (doc, _), name in zip(candidates, names)]
        ids = [i for i in forward.ids(terms) if i != 0]  # 0 separates a page's title from its text
        near = proximity(sequences, np.array(ids, dtype=np.int64), len(terms))
    rescored = [(doc, score + top * (TITLE_WEIGHT * title_similarity(query, name) + PROXIMITY_WEIGHT * float(p)))
                for (doc, score), name, p in zip(candidates, names, near)]
    rescored.sort(key=lambda item: -item[1])
    return rescored


def corrected(query: str, replacements: dict[str, str], texts: list[str]) -> str:
    """``query`` with each word whose index term is a key of ``replacements`` replaced by
    a word of ``texts`` (the hits' titles and texts) whose term is the replacement, or the
    term itself; a capitalized word stays capitalized."""
    surface: dict[str, str] = {}
    for text in texts:
        missing = {t: 1.0 for t in replacements.values() if t not in surface}
        if not missing:
            break
        for start, end, term in find_matches(text, missing):
            surface.setdefault(term, text[start:end])

    def swap(m: re.Match[str]) -> str:
        word = m.group()
        term = stem_word(word)
        if term not in replacements:
            return word
        new = surface.get(replacements[term], replacements[term])
        return new[:1].upper() + new[1:] if word[:1].isupper() else new

    return TOKEN_PATTERN.sub(swap, query)


class Searcher:
    """Queries -> ranked hits with snippets, over an engine and the simulator's store."""

    def __init__(self, engine: Any, store: Any, forward: Any | None = None, snippet_chars: int = 300,
                 depth: int = RERANK_DEPTH):
        self.engine = engine
        self.lazy = forward is None
        self.forward = LazyForwardIndex() if forward is None else forward
        self.store = store
        self.snippet_chars = snippet_chars
        self.depth = depth
        self._suggestions: dict[str, str | None] = {}

    def _suggest(self, term: str) -> str | None:
        """The engine's spelling suggestion for an unknown word of 3 to ``SUGGEST_MAX_LETTERS``
        letters (cached); a longer one is no misspelt word, and its edit-distance search would
        cost time in its length (a 10 MB word: half a minute)."""
        if not (term.isalpha() and 3 <= len(term) <= SUGGEST_MAX_LETTERS):
            return None
        if term not in self._suggestions:
            if len(self._suggestions) >= 10_000:
                self._suggestions.clear()
            self._suggestions[term] = self.engine.suggest(term)
        return self._suggestions[term]

    def _pages(self, docs: list[int]) -> dict[int, tuple[str, str]]:
        """(url, text) of pages by document number, in one store read."""
        if not docs:
            return {}
        titles = self.engine.titles
        marks = ",".join("?" * len(docs))
        rows = self.store.conn.execute(f"SELECT title, url, text FROM pages WHERE title IN ({marks})",
                                       [titles[d] for d in docs])
        by_title = {row[0]: (row[1], row[2]) for row in rows}
        return {d: by_title[titles[d]] for d in docs if titles[d] in by_title}

    def hits(self, query: str, ranked: list[tuple[int, float]], terms: list[str] | None = None,
             pages: dict[int, tuple[str, str]] | None = None) -> SearchResults:
        """Hits for pages another ranking chose (``[(docnum, score)]``, best first), their
        snippets chosen for ``terms`` (default: ``query``'s words); ``pages``: their (url, text)
        when already read (:attr:`Ranking.pages`), else read from the store."""
        if pages is None or any(d not in pages for d, _ in ranked):
            pages = self._pages([d for d, _ in ranked])
        return self._hits([(d, s) for d, s in ranked if d in pages], pages,
                          query_terms(query) if terms is None else terms)

    def _hits(self, ranked: list[tuple[int, float]], pages: dict[int, tuple[str, str]],
              terms: list[str]) -> SearchResults:
        weights = {t: self.engine.idf(t) for t in terms if self.engine.known(t)}
        return SearchResults(Hit(self.engine.titles[d], pages[d][0],
                                 best_snippet(pages[d][1], weights, self.snippet_chars), s) for d, s in ranked)

    def search(self, query: str, k: int = 10) -> SearchResults:
        """The top ``k`` hits for ``query``; spelling corrected where a word matches no page."""
        ranking = self.rank(query, k)
        results = self._hits(ranking.ranked, ranking.pages, ranking.terms)
        results.corrected_query = ranking.corrected()
        return results

    def rank(self, query: str, k: int = 10) -> "Ranking":
        """The top ``k`` pages for ``query`` without their snippets (:class:`Ranking`): what
        :meth:`search` returns, before the snippets are made."""
        terms = query_terms(query)
        replacements: dict[str, str] = {}
        for term in terms:
            if not self.engine.known(term):
                suggestion = self._suggest(term)
                if suggestion is not None:
                    replacements[term] = suggestion
        if replacements:
            terms = list(dict.fromkeys(replacements.get(t, t) for t in terms))
        candidates = self.engine.candidates(terms, max(k, self.depth))
        # A lazy forward index needs every candidate's text; a built one, only the hits'.
        pages = self._pages([d for d, _ in candidates]) if self.lazy else {}
        texts = {d: page[1] for d, page in pages.items()}
        ranked = rerank(candidates, self.engine.titles, self.forward, texts, terms)
        ranked = [(d, s) for d, s in ranked if not self.lazy or d in pages][:k]
        if not self.lazy:
            pages = self._pages([d for d, _ in ranked])
            ranked = [(d, s) for d, s in ranked if d in pages]  # else index and store disagree
        return Ranking(query, ranked, pages, terms, replacements, self.engine.titles)


@dataclass
class Ranking:
    """A query's ranked pages before their snippets are made (:meth:`Searcher.rank`)."""

    query: str
    ranked: list[tuple[int, float]]
    """(docnum, score), best first."""
    pages: dict[int, tuple[str, str]]
    """(url, text) of the ranked pages (of more, for a lazy forward index)."""
    terms: list[str]
    """The index terms searched, spelling corrected: the snippets' words."""
    replacements: dict[str, str]
    """Query term -> the indexed term that replaced it (empty when every word matched a page)."""
    titles: Sequence[str]

    def corrected(self) -> str | None:
        """The query with its replaced words (``None`` when none was, or nothing was found)."""
        if not self.replacements or not self.ranked:
            return None
        return corrected(self.query, self.replacements, [self.titles[d] for d, _ in self.ranked]
                         + [self.pages[d][1] for d, _ in self.ranked])
