"""The optional tantivy engine: the same pages, terms and API as the Whoosh index, in Rust.

``websailor wiki build --engine tantivy`` indexes each page as one field of index terms:
the text goes through the simulator's own analyzer (:func:`wiki_sim.analysis.analyze`:
the same stopwords and Porter stems as the Whoosh index), and tantivy's whitespace
tokenizer takes the terms as they are. The title and aliases are written
:data:`TITLE_REPEATS` times ahead of the body, so a title match counts as a repeated
term (BM25F with an integer title boost), with one document-level idf. A ``pid`` fast
field maps each document to its page (the store's page order).

tantivy is an optional dependency (``pip install 'websailor-gym[tantivy]'``).
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from math import log
from pathlib import Path
from typing import Any, Sequence

from wiki_sim.analysis import analyze
from wiki_sim.errors import WikiSimError
from wiki_sim.index import DEFAULT_TERM_CACHE_BYTES, _documents, _ids
from wiki_sim.spelling import edit_distance, letters_apart, open_spelling_index
from wiki_sim.term_cache import TermCache

TANTIVY_DIR = "tantivy"
TOKENIZER = "wiki_terms"
# The title and aliases are indexed this many times ahead of the body (a tf boost).
TITLE_REPEATS = 2
INSTALL_HINT = "the tantivy engine needs the tantivy package: pip install 'websailor-gym[tantivy]'"


def import_tantivy() -> Any:
    try:
        import tantivy
    except ImportError:
        raise WikiSimError(INSTALL_HINT) from None
    return tantivy


def _schema(tantivy: Any) -> Any:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("text", stored=False, tokenizer_name=TOKENIZER, index_option="freq")
    sb.add_unsigned_field("pid", stored=False, indexed=False, fast=True)
    return sb.build()


def _open(tantivy: Any, path: Path, schema: Any | None = None) -> Any:
    index = tantivy.Index(schema, path=str(path)) if schema is not None else tantivy.Index.open(str(path))
    index.register_tokenizer(TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    return index


def index_text(doc: dict[str, str]) -> str:
    """The terms indexed for one page, space-separated."""
    head = " ".join(analyze(doc["title"]) + analyze(doc["aliases"]))
    return " ".join([head] * TITLE_REPEATS + [" ".join(analyze(doc["body"]))])


# The build process's own memory besides tantivy's indexing heap (Python, SQLite, one page).
BUILD_BASE_BYTES = 160 * 2 ** 20
# tantivy refuses an indexing heap below this per thread, or above 4 GB per thread.
MIN_HEAP_PER_THREAD = 16 * 2 ** 20
MAX_HEAP_PER_THREAD = 4000 * 2 ** 20


def heap_bytes(memory_bytes: int, threads: int, held_bytes: int = BUILD_BASE_BYTES) -> int:
    """tantivy's indexing heap (all threads) within a build budget of ``memory_bytes``, the
    build process already holding ``held_bytes``."""
    threads = max(1, threads)
    heap = memory_bytes - held_bytes - 32 * 2 ** 20
    return max(MIN_HEAP_PER_THREAD * threads, min(heap, MAX_HEAP_PER_THREAD * threads))


def build_tantivy_index(store_path: str | Path, index_dir: str | Path, *, threads: int = 2,
                        progress: bool = True, memory_bytes: int | None = None) -> dict[str, Any]:
    """Index every page of a finalized store into a new tantivy index at ``index_dir``.

    tantivy's writer holds at most :func:`heap_bytes` of ``memory_bytes`` (it writes a
    segment whenever its heap fills; its merge policy joins segments in the background,
    so temporary disk stays below the size of the segments being merged)."""
    from tqdm import tqdm

    tantivy = import_tantivy()
    store_path, index_dir = Path(store_path), Path(index_dir)
    start = time.perf_counter()
    index_dir.mkdir(parents=True, exist_ok=False)
    index = _open(tantivy, index_dir, _schema(tantivy))
    from wiki_sim.budget import check_budget, resident_bytes

    if memory_bytes is None:  # as wiki_sim.build counts it: a default budget above what this process holds
        memory_bytes = resident_bytes() + 1024 * 2 ** 20
    check_budget(memory_bytes, MIN_HEAP_PER_THREAD * max(1, threads) + 32 * 2 ** 20, "indexing")
    writer = index.writer(heap_size=heap_bytes(memory_bytes, threads, resident_bytes()), num_threads=max(1, threads))
    total = sum(1 for _ in _ids(store_path))
    pid = 0
    with tqdm(total=total, desc="index", unit="page", disable=not progress, mininterval=0.5) as bar:
        for doc in _documents(store_path, 0, 2 ** 62):
            document = tantivy.Document()
            document.add_text("text", index_text(doc))
            document.add_unsigned("pid", pid)
            writer.add_document(document)
            pid += 1
            bar.update(1)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    indexed = index.searcher().num_docs
    if indexed != total:
        raise WikiSimError(f"tantivy index holds {indexed} documents but the store has {total} pages; rebuild")
    return {"documents": indexed, "segments": index.searcher().num_segments,
            "seconds": round(time.perf_counter() - start, 3)}


# Bytes counted per cached document frequency besides its term's string (the int, the
# cache's entry tuple and its ordered-dict slot: 180 measured with tracemalloc).
_DF_ENTRY_OVERHEAD = 200


def df_entry_bytes(term: str) -> int:
    """What one cached document frequency costs: the term's string and the entry around it."""
    return sys.getsizeof(term) + _DF_ENTRY_OVERHEAD


class TantivySearcher:
    """BM25 over a tantivy index, with the :class:`wiki_sim.index.IndexSearcher` API.

    tantivy's searcher is thread-safe and searches outside Python's lock, so one is shared.
    """

    def __init__(self, index_dir: str | Path, store_path: str | Path, titles: Sequence[str] | None = None,
                 max_cache_bytes: int | None = None):
        # Document frequencies of the terms searched, bounded in bytes as the Whoosh engine's cache is.
        self._df = TermCache(DEFAULT_TERM_CACHE_BYTES if max_cache_bytes is None else max_cache_bytes)
        tantivy = self._tantivy = import_tantivy()
        self.index_dir = Path(index_dir)
        if not tantivy.Index.exists(str(self.index_dir)):
            raise WikiSimError(f"no tantivy index at {self.index_dir}; rebuild with `websailor wiki build "
                               f"--engine tantivy`")
        self.index = _open(tantivy, self.index_dir)
        self.schema = self.index.schema
        self.searcher = self.index.searcher()
        self._n = self.searcher.num_docs
        if titles is not None and len(titles) == self._n:
            self.titles: Sequence[str] = titles  # the simulator's shared, memory-mapped title table
        else:
            with sqlite3.connect(f"file:{Path(store_path)}?mode=ro", uri=True) as conn:
                self.titles = [r[0] for r in conn.execute("SELECT title FROM pages ORDER BY id")]
        self._lock = threading.Lock()
        self._speller: Any = None

    def doc_count(self) -> int:
        return self._n

    @property
    def max_cache_bytes(self) -> int:
        return self._df.max_bytes

    @property
    def cache_bytes(self) -> int:
        """Bytes the term cache holds now (:func:`df_entry_bytes` per term)."""
        return self._df.bytes

    def doc_frequency(self, term: str) -> int:
        df = self._df.get(term)
        if df is None:
            df = self.searcher.doc_freq("text", term)
            self._df.put(term, df, df_entry_bytes(term))
        return df

    def known(self, term: str) -> bool:
        return self.doc_frequency(term) > 0

    def idf(self, term: str) -> float:
        return log(self._n / (self.doc_frequency(term) + 1)) + 1

    def candidates(self, terms: list[str], n: int) -> list[tuple[int, float]]:
        """The top ``n`` (document number, score) for a query's distinct index terms (OR);
        document numbers follow the store's page order (``titles[docnum]``)."""
        t = self._tantivy
        subqueries = [(t.Occur.Should, t.Query.term_query(self.schema, "text", term, index_option="freq"))
                      for term in terms if self.known(term)]
        if not subqueries:
            return []
        query = subqueries[0][1] if len(subqueries) == 1 else t.Query.boolean_query(subqueries)
        hits = self.searcher.search(query, n, count=False).hits
        pids = self.searcher.fast_field_values("pid", [address for _, address in hits])
        return [(int(pid), float(score)) for (score, _), pid in zip(hits, pids)]

    def suggest(self, term: str) -> str | None:
        """The indexed term closest in spelling to ``term`` (as IndexSearcher.suggest), through
        the simulator's deletion index (:mod:`wiki_sim.spelling`, opened or built on first use)."""
        if self._speller is None:
            with self._lock:
                if self._speller is None:
                    self._speller = open_spelling_index(self.index_dir.parent, self.vocabulary)
        return self._speller.suggest(term)

    def vocabulary(self) -> list[tuple[str, int]]:
        """Every indexed term with its document frequency."""
        return self.searcher.terms_with_prefix("text", "")

    def suggest_by_scan(self, term: str) -> str | None:
        """:meth:`suggest` by scanning every term with the same first letter (the reference
        the deletion index is tested and benchmarked against)."""
        maxdist = 2 if len(term) >= 5 else 1
        best: tuple[int, int, int, str] | None = None
        for cand, df in self.searcher.terms_with_prefix("text", term[:1]):
            if cand == term or abs(len(cand) - len(term)) > maxdist:
                continue
            dist = edit_distance(term, cand)
            if dist <= maxdist:
                key = (dist, letters_apart(term, cand), -df, cand)
                if best is None or key < best:
                    best = key
        return best[-1] if best else None

    def search(self, query: str, k: int = 10) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """The plain BM25 top ``k`` (title, score) for ``query``, and its terms' idf."""
        from wiki_sim.index import query_terms

        terms = query_terms(query)
        hits = [(self.titles[d], s) for d, s in self.candidates(terms, k)]
        return hits, {t: self.idf(t) for t in terms if self.known(t)}

    def close(self) -> None:
        pass
