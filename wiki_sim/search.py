"""Search as a person expects it, on top of either engine's BM25 candidates.

An engine (the Whoosh index, or tantivy) ranks pages by BM25 over title, aliases and body.
This layer reads the top :data:`RERANK_DEPTH` candidates' text once and re-ranks them:

- a page whose title is the query (or nearly: the query holds the title's words, or the
  title the query's) rises by up to the best candidate's score, so ``Albert Einstein``
  finds Albert Einstein first, not Albert Ellis;
- query words that stand next to each other in the page (a phrase, stopwords between
  allowed) rank it above pages where they lie scattered;
- a query word no page holds is replaced by the indexed word closest in spelling
  (``Einstien`` -> ``einstein``), and the result says so (``corrected_query``).

The same text gives the snippets, so a hit costs one store read.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass
from typing import Any, Protocol

from wiki_sim.analysis import TOKEN_PATTERN, analyze, stem_word
from wiki_sim.index import query_terms
from wiki_sim.snippets import best_snippet, find_matches

# Candidates re-ranked per query (the engine's top BM25 pages).
RERANK_DEPTH = 30
# Weights of the two bonuses, as fractions of the best candidate's BM25 score.
TITLE_WEIGHT = 1.0
PROXIMITY_WEIGHT = 0.5
# Characters of a page scanned for adjacent query words (long articles: the beginning).
PROXIMITY_CHARS = 20_000
# Query words that are adjacent may have at most this many characters between them
# (spaces, punctuation and stopwords only: "Duke of Wellington").
MAX_GAP_CHARS = 12
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


class Engine(Protocol):
    """What the search layer needs from an index."""

    def candidates(self, terms: list[str], n: int) -> list[tuple[str, float]]: ...
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


@lru_cache(maxsize=100_000)
def title_terms(title: str) -> tuple[frozenset[str], frozenset[str]]:
    """The index terms of a title, with and without its trailing parenthetical."""
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


def adjacent_pairs(text: str, weights: dict[str, float]) -> int:
    """Distinct pairs of different query terms standing next to each other in ``text``
    (only spaces, punctuation or a few stopwords between them)."""
    matches = find_matches(text, weights)
    pairs: set[frozenset[str]] = set()
    for (_, end, a), (start, _, b) in zip(matches, matches[1:]):
        if a == b or start - end > MAX_GAP_CHARS:
            continue
        gap = text[end:start]
        if all(stem_word(w) is None for w in TOKEN_PATTERN.findall(gap)):
            pairs.add(frozenset((a, b)))
    return len(pairs)


def proximity(text: str, title: str, terms: list[str]) -> float:
    """Share of the query's possible adjacent pairs found adjacent in the title or text."""
    if len(terms) < 2:
        return 0.0
    weights = dict.fromkeys(terms, 1.0)
    found = adjacent_pairs(text[:PROXIMITY_CHARS], weights)
    if found < len(terms) - 1 and len(title_terms(title)[0]) > 1:
        found = max(found, adjacent_pairs(title, weights))
    return min(1.0, found / (len(terms) - 1))


def rerank(candidates: list[tuple[str, float]], texts: dict[str, str], terms: list[str]) -> list[tuple[str, float]]:
    """Candidates re-scored with the title and proximity bonuses, best first (stable)."""
    if not candidates:
        return []
    top = max(score for _, score in candidates)
    query = set(terms)
    rescored = []
    for title, score in candidates:
        bonus = TITLE_WEIGHT * title_similarity(query, title)
        bonus += PROXIMITY_WEIGHT * proximity(texts.get(title, ""), title, terms)
        rescored.append((title, score + top * bonus))
    rescored.sort(key=lambda item: -item[1])
    return rescored


def corrected(query: str, replacements: dict[str, str], texts: list[str]) -> str:
    """``query`` with each word whose index term is a key of ``replacements`` replaced by
    a word of ``texts`` (the hits) whose term is the replacement, or the term itself."""
    surface: dict[str, str] = {}
    for text in texts:
        missing = {t: 1.0 for t in replacements.values() if t not in surface}
        if not missing:
            break
        for start, end, term in find_matches(text, missing):
            surface.setdefault(term, text[start:end])

    def swap(m: re.Match[str]) -> str:
        term = stem_word(m.group())
        if term in replacements:
            return surface.get(replacements[term], replacements[term])
        return m.group()

    return TOKEN_PATTERN.sub(swap, query)


class Searcher:
    """Queries -> ranked hits with snippets, over an engine and the simulator's store."""

    def __init__(self, engine: Any, store: Any, snippet_chars: int = 300, depth: int = RERANK_DEPTH):
        self.engine = engine
        self.store = store
        self.snippet_chars = snippet_chars
        self.depth = depth

    def _texts(self, titles: list[str]) -> dict[str, tuple[str, str]]:
        if not titles:
            return {}
        marks = ",".join("?" * len(titles))
        rows = self.store.conn.execute(f"SELECT title, url, text FROM pages WHERE title IN ({marks})", titles)
        return {row[0]: (row[1], row[2]) for row in rows}

    def search(self, query: str, k: int = 10) -> SearchResults:
        """The top ``k`` hits for ``query``; spelling corrected where a word matches no page."""
        terms = query_terms(query)
        replacements: dict[str, str] = {}
        for term in terms:
            if not self.engine.known(term):
                suggestion = self.engine.suggest(term)
                if suggestion is not None:
                    replacements[term] = suggestion
        if replacements:
            terms = list(dict.fromkeys(replacements.get(t, t) for t in terms))
        candidates = self.engine.candidates(terms, max(k, self.depth))
        pages = self._texts([title for title, _ in candidates])
        candidates = [(t, s) for t, s in candidates if t in pages]  # else index and store disagree
        ranked = rerank(candidates, {t: pages[t][1] for t, _ in candidates}, terms)[:k]
        weights = {t: self.engine.idf(t) for t in terms if self.engine.known(t)}
        results = SearchResults(Hit(title, pages[title][0], best_snippet(pages[title][1], weights, self.snippet_chars),
                                    score) for title, score in ranked)
        if replacements and results:
            results.corrected_query = corrected(query, replacements, [pages[t][1] for t, _ in ranked])
        return results
