"""An in-memory index of the whole simulator for the uniqueness check.

Built once per run through ``wiki_sim.WikiSim``'s public bulk API (``iter_pages``,
``iter_links``, ``page``, ``facts``): for every page its words, years, numbers, short
description and facts, inverted so that a clue's candidate set is a few set operations,
and the undirected link adjacency for relation clues.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from sailorfog.describe import PERSON_HEADS, defining_type, type_key
from sailorfog.pagesets import ByteLRU
from sailorfog.text import display_title, numbers, years
from wiki_sim.focus import tokenize

CACHE_BYTES = 64 << 20
"""Default bound of an index's candidate-set cache (per process)."""


@dataclass
class CorpusIndex:
    """Page features by integer id, and inverted indexes over them."""

    titles: list[str] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    word_pages: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    desc_pages: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    year_pages: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    fact_pages: dict[tuple[str, str], set[int]] = field(default_factory=lambda: defaultdict(set))
    page_years: list[frozenset[int]] = field(default_factory=list)
    page_min_year: list[int | None] = field(default_factory=list)
    neighbors: list[set[int]] = field(default_factory=list)
    _numbers: list[tuple[float, int]] = field(default_factory=list)
    _number_keys: list[float] = field(default_factory=list)
    _linked: set[int] | None = None
    _everything: frozenset[int] | None = None
    _prefix2: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    _initials: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    type_pages: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    """Type word -> pages whose defining first sentence gives a type with that word."""
    page_type: list[tuple[str, ...]] = field(default_factory=list)
    """The type words of each page's defining sentence (``("natural", "stream")``; empty: none)."""
    inbound: list[int] = field(default_factory=list)
    """Inbound links of each page (its popularity), when known."""
    _persons: set[int] | None = None
    cache: ByteLRU = field(default_factory=lambda: ByteLRU(CACHE_BYTES))
    """Unary candidate sets by check (filled by :mod:`sailorfog.constraints`), least recently used
    dropped past its byte bound."""
    _solver: Any = field(default=None, repr=False, compare=False)
    """The arrays :mod:`sailorfog.constraints` reads (rebuilt after a change)."""

    def add_page(self, title: str, text: str, facts: Iterable[dict[str, Any]] = ()) -> int:
        """Index one page; returns its id."""
        pid = len(self.titles)
        self._solver = None
        self.titles.append(title)
        self.ids[title] = pid
        for word in set(tokenize(f"{display_title(title)} {text}")):
            self.word_pages[word].add(pid)
        ys = frozenset(years(text))
        for y in ys:
            self.year_pages[y].add(pid)
        self.page_years.append(ys)
        self.page_min_year.append(min(ys) if ys else None)
        for value in set(numbers(text)):
            self._numbers.append((value, pid))
        for fact in facts:
            key, value = str(fact.get("key") or ""), " ".join(str(fact.get("value") or "").split())
            if key == "description":
                for word in set(tokenize(value)):
                    self.desc_pages[word].add(pid)
            elif key and value:
                self.fact_pages[(key, value.lower())].add(pid)
        self.neighbors.append(set())
        kind = tuple(defining_type(text))
        self.page_type.append(kind)
        for word in type_key(kind):
            self.type_pages[word].add(pid)
        name = display_title(title)
        self._prefix2[name[:2].lower()].add(pid)
        self._initials[_initials(title)].add(pid)
        return pid

    def add_link(self, source: str, target: str) -> None:
        a, b = self.ids.get(source), self.ids.get(target)
        if a is not None and b is not None and a != b:
            self._solver = None
            self.neighbors[a].add(b)
            self.neighbors[b].add(a)

    def finish(self) -> CorpusIndex:
        """Sort the number index (call once after the last page)."""
        self._linked = None
        self._solver = None
        self._numbers.sort()
        self._number_keys = [v for v, _ in self._numbers]
        return self

    def everything(self) -> frozenset[int]:
        """Every page id."""
        if self._everything is None or len(self._everything) != len(self):
            self._everything = frozenset(range(len(self)))
        return self._everything

    def linked(self) -> set[int]:
        """Pages with at least one link (the support of a link check against "any page")."""
        if self._linked is None:
            self._linked = {i for i, nbs in enumerate(self.neighbors) if nbs}
        return self._linked

    def __len__(self) -> int:
        return len(self.titles)

    # --- candidate sets -------------------------------------------------------------
    def with_words(self, words: Iterable[str], description: bool = False) -> set[int]:
        index = self.desc_pages if description else self.word_pages
        out: set[int] | None = None
        for word in sorted(words, key=lambda w: len(index.get(w, ()))):
            pages = index.get(word, set())
            out = set(pages) if out is None else out & pages
            if not out:
                return set()
        return set(range(len(self))) if out is None else out

    def with_type(self, words: Iterable[str]) -> set[int]:
        """Pages whose defining sentence's type holds every one of ``words``."""
        out: set[int] | None = None
        for word in type_key(words):
            pages = self.type_pages.get(word, set())
            out = set(pages) if out is None else out & pages
            if not out:
                return set()
        return set() if out is None else out

    def with_person(self) -> set[int]:
        """Pages whose defining sentence makes the entity a person."""
        if self._persons is None:
            self._persons = {i for i, t in enumerate(self.page_type) if t and t[-1].lower() in PERSON_HEADS}
        return set(self._persons)

    def with_name_words(self, n: int) -> set[int]:
        """Pages whose name (title without its disambiguator) has ``n`` words."""
        key = f"name_words:{n}"
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = frozenset(i for i, t in enumerate(self.titles)
                                                if len(display_title(t).split()) == n)
        return set(found)

    def with_year(self, lo: int, hi: int) -> set[int]:
        out: set[int] = set()
        for y in range(int(lo), int(hi) + 1):
            out |= self.year_pages.get(y, set())
        return out

    def with_number(self, lo: float, hi: float) -> set[int]:
        i = bisect.bisect_left(self._number_keys, lo)
        j = bisect.bisect_right(self._number_keys, hi)
        return {pid for _, pid in self._numbers[i:j]}

    def with_fact(self, key: str, value: str) -> set[int]:
        return set(self.fact_pages.get((key, " ".join(value.split()).lower()), set()))

    def with_prefix(self, prefix: str) -> set[int]:
        p = prefix.lower()
        if len(p) >= 2:
            return {i for i in self._prefix2.get(p[:2], ()) if display_title(self.titles[i]).lower().startswith(p)}
        return {i for key, pages in self._prefix2.items() if key.startswith(p) for i in pages}

    def with_initials(self, initials: str) -> set[int]:
        return set(self._initials.get(initials.replace(".", "").replace(" ", "").upper(), ()))


def _initials(title: str) -> str:
    return "".join(w[0] for w in display_title(title).split() if w[:1].isalpha()).upper()


def initials(title: str) -> str:
    """``"T. D."`` for ``Tasmanian devil``."""
    return " ".join(f"{c}." for c in _initials(title))


def index_from_sim(sim: Any) -> CorpusIndex:
    """The index of every page, fact and resolved link of a :class:`wiki_sim.WikiSim`."""
    facts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for page, key, value, _source, _target in sim.iter_facts():
        facts[page].append({"key": key, "value": value})
    index = CorpusIndex()
    for info in sim.iter_pages():
        page = sim.page(info.title) or {}
        index.add_page(info.title, page.get("text", ""), facts.get(info.title, ()))
        index.inbound.append(int(info.inbound_links))
    for link in sim.iter_links():
        index.add_link(link.source, link.target)
    if not len(index):
        raise ValueError(f"the simulator at {getattr(sim, 'path', sim)} has no pages")
    return index.finish()
