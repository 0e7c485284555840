"""WikiSim: the offline Wikipedia simulator's API (search, visit, and look-ups for synthesis).

One :class:`WikiSim` opens a built simulator directory once (the SQLite store and the search
index: Whoosh by default, or tantivy, as build.json records) and is shared by every
environment in the process, in any number of threads: searches are thread-safe (the engines
cache per-term data and lock only to read the index), a search that arrives while another
runs goes to a helper process so that threads search in parallel despite Python's
interpreter lock (:mod:`wiki_sim.search_processes`), store reads use a connection per
thread, and identical queries (GRPO samples many rollouts of the same question) are served
from an LRU cache.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Literal

from wiki_sim.errors import WikiSimError
from wiki_sim.dense import DENSE_WEIGHT, RETRIEVERS, DenseIndex, Retriever, rrf
from wiki_sim.focus import ExtractiveSummarizer, Focused, Summarizer, format_not_found, format_visit
from wiki_sim.engines import open_engine, open_forward_index
from wiki_sim.records import LinkInfo, PageInfo, url_to_title
from wiki_sim.search import Hit, Searcher, SearchResults
from wiki_sim.search_processes import SearchProcesses, default_processes
from wiki_sim.store import STORE_FILE, STORE_FORMAT, Store

BUILD_FILE = "build.json"
MAX_CACHED_KEY_CHARS = 2048
"""Longest query, or url plus goal, whose result the LRU caches keep: longer ones (which the
tools refuse anyway) are answered but not cached, so that a cache entry stays small and the
caches' memory stays bounded by ``cache_size`` entries whatever the callers send."""

HYBRID_DEPTH = 30
"""How deep each ranking is read before fusion (hybrid retriever)."""

BUILD_FORMAT = STORE_FORMAT
"""``format`` of build.json; simulators of another format must be rebuilt."""


class LRUCache:
    """A thread-safe least-recently-used map with hit/miss counts, holding at most ``maxsize``
    entries and, when ``max_bytes`` is given, at most that many bytes as ``sizeof(key, value)``
    counts them (an entry larger than the whole budget is not kept)."""

    def __init__(self, maxsize: int, max_bytes: int | None = None,
                 sizeof: Callable[[Hashable, Any], int] | None = None):
        if max_bytes is not None and (not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0):
            raise ValueError(f"max_bytes must be None or an integer >= 0, got {max_bytes!r}")
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self._sizeof = sizeof or (lambda key, value: sys.getsizeof(key) + sys.getsizeof(value))
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key][0]
            self.misses += 1
            return None

    def peek(self, key: Hashable) -> Any | None:
        """The value of ``key`` without counting a hit or a miss or refreshing it (``None``: not held)."""
        with self._lock:
            found = self._data.get(key)
            return found[0] if found is not None else None

    def put(self, key: Hashable, value: Any) -> None:
        if self.maxsize <= 0:
            return
        size = self._sizeof(key, value) if self.max_bytes is not None else 0
        if self.max_bytes is not None and size > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._data[key] = (value, size)
            self.bytes += size
            while len(self._data) > self.maxsize or (self.max_bytes is not None and self.bytes > self.max_bytes):
                self.bytes -= self._data.popitem(last=False)[1][1]

    def info(self) -> dict[str, int | None]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize,
                    "bytes": self.bytes, "max_bytes": self.max_bytes}


# Bytes counted per cached entry besides its strings (the key tuple, the entry, the map's slot;
# per hit: the Hit object and its slot in the list).
_ENTRY_BYTES = 250
_HIT_BYTES = 200


def _text_bytes(text: object) -> int:
    return sys.getsizeof(text) if isinstance(text, str) else 0


def search_entry_bytes(key: Hashable, hits: list[Hit]) -> int:
    """What a cached search costs: its query, and each hit's title, url and snippet."""
    query = key[0] if isinstance(key, tuple) else key
    return (_ENTRY_BYTES + _text_bytes(query) + sys.getsizeof(hits)
            + sum(_HIT_BYTES + _text_bytes(h.title) + _text_bytes(h.url) + _text_bytes(h.snippet) for h in hits))


def ranked_entry_bytes(key: Hashable, titles: tuple[str, ...]) -> int:
    """What a cached ranking costs: its query and titles."""
    query = key[0] if isinstance(key, tuple) else key
    return _ENTRY_BYTES + _text_bytes(query) + sys.getsizeof(titles) + sum(_text_bytes(t) for t in titles)


def visit_entry_bytes(key: Hashable, text: str) -> int:
    """What a cached visit costs: its url, goal and text."""
    url, goal = key if isinstance(key, tuple) else (key, "")
    return _ENTRY_BYTES + _text_bytes(url) + _text_bytes(goal) + _text_bytes(text)


DEFAULT_CACHE_BYTES = 8 * 2 ** 20
"""Default bound of the search cache and of the visit cache, each (bytes, per process): about
2,000 searches or visits of the default corpus's pages."""


# What a build leaves in its directory besides build.json (a folder holding some of these
# but no build.json is an interrupted build; one holding none is not a simulator at all).
_BUILD_OUTPUTS = (STORE_FILE, "index", "terms")


def read_build_info(path: str | Path) -> dict[str, Any]:
    """The ``build.json`` of a complete simulator directory; :class:`WikiSimError` otherwise."""
    path = Path(path)
    if not path.is_dir():
        raise WikiSimError(f"no simulator at {path}: build one with `websailor wiki build --out {path}`")
    info_file = path / BUILD_FILE
    if not info_file.is_file() and not any((path / name).exists() for name in _BUILD_OUTPUTS):
        raise WikiSimError(f"{path} is not a simulator directory (no {BUILD_FILE}, store or index in it); "
                           f"build one with `websailor wiki build --out {path}`")
    if not info_file.is_file():
        raise WikiSimError(f"{path} is not a complete simulator (no {BUILD_FILE}: its build was interrupted or "
                           f"failed); remove it, then rebuild with `websailor wiki build --out {path}`")
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WikiSimError(f"{info_file} is unreadable ({exc}); rebuild the simulator") from None
    if not isinstance(info, dict):
        raise WikiSimError(f"{info_file} is not a build record; rebuild the simulator")
    if info.get("format") != BUILD_FORMAT:
        raise WikiSimError(f"{path} was built in format {info.get('format')!r}, this version of websailor-gym reads "
                           f"format {BUILD_FORMAT}; rebuild it with `bash setup_wiki.sh` (the default simulator) or "
                           f"`websailor wiki build --out {path}`")
    return info


def build_fingerprint(info: dict[str, Any]) -> str:
    """A digest of a build record: two opens of a directory see the same build iff equal."""
    return hashlib.sha256(json.dumps(info, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def normalize_query(query: str) -> str:
    """Whitespace collapsed, so that queries differing only in spacing share a cache entry."""
    return " ".join(query.split())


def _checked_queries(queries: list[str] | str, k: int) -> list[str]:
    """``queries`` (one string or a list) normalized; a bad ``k`` or a query that is not a string is a
    :class:`ValueError`."""
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    for query in queries:
        if not isinstance(query, str):
            raise ValueError(f"each query must be a string, got {type(query).__name__}")
    return [normalize_query(q) for q in queries]


def _copy(hits: SearchResults) -> SearchResults:
    out = SearchResults(hits)
    out.corrected_query = hits.corrected_query
    return out


class WikiSim:
    """A built simulator directory, opened once.

    ``summarizer`` turns a page into the visit tool's evidence and summary (default:
    :class:`~wiki_sim.focus.ExtractiveSummarizer`, no model). ``cache_size`` (entries) and
    ``cache_bytes`` (default :data:`DEFAULT_CACHE_BYTES`) bound each of the search, ranking
    (:meth:`ranked_titles`) and visit LRU caches, per process; ``snippet_chars`` is the snippet length.
    ``search_processes`` is how many helper processes may take searches that arrive while
    one already runs in this process (a search is mostly Python, so threads alone would
    take turns on the interpreter lock; see :mod:`wiki_sim.search_processes`): ``None``
    for one per core (at most 4), ``0`` to search only in the calling threads. Helpers
    start on the first such search, never for a single-threaded caller.
    ``term_cache_bytes`` bounds the search engine's per-term cache, least recently used
    terms dropped first (the Whoosh engine's score arrays, the tantivy engine's document
    frequencies; default :data:`~wiki_sim.index.DEFAULT_TERM_CACHE_BYTES`, per process).

    ``retriever`` chooses how :meth:`search` ranks pages: ``"bm25"`` (the engine's BM25 with
    the title, phrase and spelling layer of :mod:`wiki_sim.search`), ``"dense"`` (the
    static-embedding index of :mod:`wiki_sim.dense`, which the simulator must have been built
    with) or ``"hybrid"`` (both, fused by reciprocal rank; the spelling correction is
    BM25's).

    Opening maps the build's tables (titles, field lengths, forward index) read-only instead
    of loading them: every process opening the same simulator (search helpers, the
    sub-environments of a vector environment) shares one copy through the page cache.
    """

    def __init__(self, path: str | Path, summarizer: Summarizer | None = None, cache_size: int = 4096,
                 snippet_chars: int = 300, search_processes: int | None = None,
                 term_cache_bytes: int | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 retriever: Retriever = "bm25"):
        if retriever not in RETRIEVERS:
            raise ValueError(f"retriever must be one of {', '.join(RETRIEVERS)}, got {retriever!r}")
        if search_processes is not None and (not isinstance(search_processes, int)
                                             or isinstance(search_processes, bool) or search_processes < 0):
            raise ValueError(f"search_processes must be None or an integer >= 0, got {search_processes!r}")
        self.path = Path(path)
        self.build_info = read_build_info(self.path)
        self.store = Store(self.path / STORE_FILE)
        if not isinstance(cache_bytes, int) or isinstance(cache_bytes, bool) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be an integer >= 0, got {cache_bytes!r}")
        if term_cache_bytes is not None and (not isinstance(term_cache_bytes, int) or term_cache_bytes < 0):
            raise ValueError(f"term_cache_bytes must be None or an integer >= 0, got {term_cache_bytes!r}")
        self.engine_name, self.index = open_engine(self.path, self.build_info, term_cache_bytes)
        self.summarizer: Summarizer = summarizer if summarizer is not None else ExtractiveSummarizer()
        self.snippet_chars = snippet_chars
        self.searcher = Searcher(self.index, self.store, forward=open_forward_index(self.path, self.index.doc_count()),
                                 snippet_chars=snippet_chars)
        self.retriever: Retriever = retriever
        self.dense = None
        if retriever != "bm25":
            try:
                self.dense = DenseIndex(self.path, build_fingerprint(self.build_info), self.index.doc_count(),
                                        retriever)
            except BaseException:
                self.index.close()
                raise
        self._search_cache = LRUCache(cache_size, cache_bytes, search_entry_bytes)
        self._visit_cache = LRUCache(cache_size, cache_bytes, visit_entry_bytes)
        self._rank_cache = LRUCache(cache_size, cache_bytes, ranked_entry_bytes)
        self.searches = SearchProcesses(
            self.path, self.searcher.search, default_processes() if search_processes is None else search_processes,
            snippet_chars, build_fingerprint(self.build_info))

    # --- search -------------------------------------------------------------------------
    def search(self, queries: list[str] | str, k: int = 10) -> list[list[Hit]]:
        """For each query, the top ``k`` hits (title, url, snippet); ``[]`` for a blank query.

        Each query's list is a :class:`~wiki_sim.search.SearchResults`: its
        ``corrected_query`` is set when a word matched no page and a word spelled like it
        was searched instead."""
        return [self._search_one(query, k) for query in _checked_queries(queries, k)]

    def ranked_titles(self, queries: list[str] | str, k: int = 10) -> list[list[str]]:
        """For each query, the titles of :meth:`search`'s hits in its order, without making their snippets:
        what a check of an answer's rank needs (BM25 ranks here, in this process; a dense or hybrid
        simulator, or a search already cached, gives its hits' titles)."""
        out = []
        for query in _checked_queries(queries, k):
            if not query or self.dense is not None or self._search_cache.peek((query, k)) is not None:
                out.append([h.title for h in self._search_one(query, k)])  # counted once, by the search cache
                continue
            titles = self._rank_cache.get((query, k))
            if titles is None:
                titles = tuple(self.index.titles[d] for d, _ in self.searcher.rank(query, k).ranked)
                if len(query) <= MAX_CACHED_KEY_CHARS:
                    self._rank_cache.put((query, k), titles)
            out.append(list(titles))
        return out

    def _search_one(self, query: str, k: int) -> list[Hit]:
        if not query:
            return SearchResults()
        key = (query, k)
        cached = self._search_cache.get(key)
        if cached is not None:
            return _copy(cached)
        if self.dense is None:
            hits = self.searches.search(query, k)
        elif self.retriever == "dense":
            hits = self.searcher.hits(query, self.dense.search(query, k))
        else:
            hits = self._hybrid(query, k)
        if len(query) <= MAX_CACHED_KEY_CHARS:
            self._search_cache.put(key, hits)
        return _copy(hits)

    def _hybrid(self, query: str, k: int) -> SearchResults:
        """BM25's and the dense index's top ``max(k, HYBRID_DEPTH)`` fused by weighted reciprocal
        rank (:data:`wiki_sim.dense.RRF_K`, :data:`wiki_sim.dense.DENSE_WEIGHT`)."""
        depth = max(k, HYBRID_DEPTH)
        ranking = self.searcher.rank(query, depth)  # snippets only for the pages the fusion keeps
        lexical = {self.index.titles[d]: (d, score) for d, score in ranking.ranked}
        dense = {self.index.titles[d]: d for d, _ in self.dense.search(query, depth)}
        fused = rrf([list(lexical), list(dense)], weights=(1.0, DENSE_WEIGHT))[:k]
        kept = [lexical[t] for t in fused if t in lexical]
        by_title = {h.title: h for h in self.searcher.hits(query, kept, ranking.terms, ranking.pages)}
        by_title.update((h.title, h) for h in self.searcher.hits(
            query, [(dense[t], 0.0) for t in fused if t not in lexical]))
        out = SearchResults(by_title[t] for t in fused if t in by_title)
        out.corrected_query = ranking.corrected()
        return out

    # --- visit --------------------------------------------------------------------------
    def read(self, url: str, goal: str) -> tuple[dict[str, Any], Focused] | None:
        """The page a URL names (redirects followed) and its goal-focused content; ``None`` if unknown."""
        title = self.title_for_url(url) if isinstance(url, str) else None
        page = self.store.page(title) if title else None
        if page is None:
            return None
        focused = self.summarizer(url=page["url"], title=page["title"], text=page["text"], lead=page["lead"],
                                  goal=goal)
        return page, focused

    def visit(self, url: str, goal: str) -> str:
        """The visit tool's text for ``url``: evidence for ``goal`` and a summary, or a
        "page not found" text for a URL the simulator has no page for."""
        if not isinstance(url, str) or not isinstance(goal, str):
            raise ValueError(f"url and goal must be strings, got {type(url).__name__} and {type(goal).__name__}")
        key = (url, goal)
        cached = self._visit_cache.get(key)
        if cached is not None:
            return cached
        result = self.read(url, goal)
        if result is None:
            title = url_to_title(url)
            text = format_not_found(url, goal, self.closest_pages(title) if title else [])
        else:
            text = format_visit(url, goal, result[1])
        if len(url) + len(goal) <= MAX_CACHED_KEY_CHARS:
            self._visit_cache.put(key, text)
        return text

    def title_for_url(self, url: str) -> str | None:
        """The page a URL names: a document stored under its own URL (a web-page corpus), else
        the title of a Wikipedia URL or bare title (not checked against the store)."""
        url = url.strip()
        if "://" in url and len(url) <= MAX_CACHED_KEY_CHARS:
            own = self.store.title_for_url(url)
            if own is not None:
                return own
        return url_to_title(url)

    def closest_pages(self, title: str, n: int = 3) -> list[tuple[str, str]]:
        """``(title, url)`` of the pages whose titles are closest to ``title`` (for "did you mean"):
        the index's best hits for the title's words, ordered by how alike the titles are."""
        title = title[:200].replace("_", " ").strip()
        if not title:
            return []
        hits = self.search([title], k=10)[0]
        alike = sorted(hits, key=lambda h: -difflib.SequenceMatcher(None, title.lower(), h.title.lower()).ratio())
        return [(h.title, h.url) for h in alike[:n]]

    # --- look-ups for synthesis ---------------------------------------------------------
    def resolve(self, title: str) -> str | None:
        """The canonical title for a title or alias, ``None`` if unknown."""
        return self.store.resolve(title)

    def page(self, title: str) -> dict[str, Any] | None:
        """``{title, url, lead, text, sections}`` for a title or alias, or ``None``."""
        return self.store.page(title)

    def links(self, title: str, direction: Literal["out", "in"] = "out") -> list[dict[str, str]]:
        """Links out of (``{target, anchor}``) or into (``{source, anchor}``) a page."""
        return self.store.links(title, direction)

    def facts(self, title: str) -> list[dict[str, str | None]]:
        """``{key, value, source, target}`` facts of a page (infobox fields, short description, ...);
        ``target`` is the canonical title of the page the value links to (``birth_place`` ->
        ``Ulm``), else ``None``."""
        return self.store.facts(title)

    # --- bulk reads for synthesis -------------------------------------------------------
    def iter_pages(self) -> Iterator[PageInfo]:
        """Every page (title, url, text length, inbound-link count), in store order."""
        return self.store.iter_pages()

    def iter_links(self) -> Iterator[LinkInfo]:
        """Every resolved link (to a page of the simulator), with the sentence of the source
        page that carries it; grouped by source page, in store order."""
        return self.store.iter_links()

    def page_links(self, title: str) -> list[LinkInfo]:
        """The resolved links out of one page (a title or alias), with their sentences."""
        return self.store.page_links(title, resolved=True)

    def dangling_links(self, title: str | None = None) -> list[LinkInfo]:
        """Links to titles that are not pages of the simulator: out of ``title``, or all."""
        if title is None:
            return list(self.store.dangling_links())
        return self.store.page_links(title, resolved=False)

    def iter_facts(self, key: str | None = None) -> Iterator[tuple[str, str, str, str, str | None]]:
        """``(page, key, value, source, target)`` of every fact (only ``key``'s if given), in store order."""
        return self.store.iter_facts(key)

    def iter_leads(self) -> Iterator[tuple[str, str]]:
        """``(title, lead)`` of every page, in store order."""
        return self.store.iter_leads()

    def aliases(self, title: str) -> list[str]:
        """Other names of a page (a title or alias): the names the page gives itself (its title
        without the disambiguator, bold lead names, "also known as" names; see :meth:`names`),
        then the redirects to it, sorted; no duplicates, never the title itself."""
        canonical = self.store.resolve(title)
        if not canonical:
            return []
        out = dict.fromkeys(n for n, _ in self.store.names(canonical))
        out.update(dict.fromkeys(self.store.aliases(canonical)))
        out.pop(canonical, None)
        return list(out)

    def names(self, title: str) -> list[tuple[str, str]]:
        """``(name, source)`` of the other names a page gives itself: source ``title`` ("Berlin"
        for "Berlin (band)"), ``bold`` (bold names of a dump's lead), ``lead`` ("also known as",
        "or", a parenthesised native name in the defining sentence)."""
        canonical = self.store.resolve(title)
        return self.store.names(canonical) if canonical else []

    def link_summary(self) -> dict[str, Any]:
        """How the simulator's links were made: ``{"links": N, "links_resolved": N, "derived": bool,
        "method": str}``. ``derived`` is true when the corpus had no wikilinks and the links were
        found in the text (:mod:`wiki_sim.ingest.entity_links`); ``links_resolved == 0`` means
        the corpus has no links between its pages at all."""
        counts = self.build_info.get("counts", {})
        links = self.build_info.get("links") or {}
        return {"links": counts.get("links", 0), "links_resolved": counts.get("links_resolved", 0),
                "derived": bool(links.get("derived", False)), "method": links.get("method", "wikilinks")}

    def random_pages(self, n: int, seed: int | None = None, min_links: int = 0, min_chars: int = 0) -> list[str]:
        """``n`` distinct page titles drawn reproducibly (for a seed) among pages with at
        least ``min_links`` outgoing links and ``min_chars`` characters of text."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return self.store.random_titles(n, seed=seed, min_links=min_links, min_chars=min_chars)

    # --- bookkeeping --------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Build metadata plus live numbers: pages, indexed documents, cache hits."""
        return {
            "path": str(self.path),
            "pages": self.store.count(),
            "documents_indexed": self.index.doc_count(),
            "engine": self.engine_name,
            "retriever": self.retriever,
            "search_cache": self._search_cache.info(),
            "search_processes": {"max": self.searches.processes, "serving": self.searches.helpers(),
                                 "failures": self.searches.failures},
            "visit_cache": self._visit_cache.info(),
            "rank_cache": self._rank_cache.info(),
            "build": self.build_info,
        }

    def close(self) -> None:
        self.searches.close()
        self.index.close()

    def __enter__(self) -> WikiSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        extra = "" if self.retriever == "bm25" else f", retriever={self.retriever!r}"
        return f"WikiSim({str(self.path)!r}{extra})"
