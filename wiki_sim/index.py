"""The simulator's Whoosh index: schema, parallel build from the store, search.

Scoring is BM25F over three fields: the title (boosted), the page's aliases (its redirects,
boosted) and the body. Agent queries are long natural-language strings, so the parser joins
terms with OR (AND would return nothing). Query syntax an agent types by accident is not
interpreted: ``?`` and ``*`` are not wildcards, ``word:`` is not a field, ``^`` is not a
boost, quotes are not phrases (the body keeps no positions), an apostrophe is not a quote,
and AND/OR/NOT are ordinary words (a stray ``NOT x`` would otherwise return every page
without ``x``). Every word of the query counts; pages matching more of them rank higher.

Building: the pages are split into ``procs`` contiguous slices; one writer process per
slice analyzes its pages and writes a segment, and the parent merges the segments into
one index (one table of contents). Merging the postings into a single segment as well
costs more than the parallel writers save (Whoosh merges posting by posting in Python;
measured about 2x the CPU of a single writer on the default corpus) and searching two
segments is as fast as one, so the segments are kept.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sqlite3
import threading
import time
from array import array
from math import log
from pathlib import Path
from typing import Any, Iterator

from whoosh import index as whoosh_index
from whoosh import qparser, scoring
from whoosh.codec.whoosh3 import W3Codec
from whoosh.fields import Schema
from whoosh.query import Or
from whoosh.writing import SegmentWriter

from wiki_sim.analysis import WikiText
from wiki_sim.errors import WikiSimError

INDEX_DIR = "index"
# A title or alias match counts 1.5 occurrences (a term frequency, so it saturates like any
# BM25 term). Tuned on query sets other than the benchmark's (benchmarks/search.py, seeds 1
# and 2): 3.0 ranked any page with a query word in its title above the page described.
TITLE_BOOST = 1.5
ALIASES_BOOST = 1.5
SEARCH_FIELDS = ("title", "aliases", "body")
# Below this many documents an OR query preloads its matches into a score array, which is
# about 2x faster here than Whoosh's tree of union matchers; above it the tree's skipping
# of low-scoring blocks wins (the array scan is linear in the index size).
ARRAY_MATCHER_MAX_DOCS = 100_000
# Parser plugins that turn ordinary characters of a natural-language query into syntax.
_DROPPED_PLUGINS = (
    qparser.WildcardPlugin, qparser.FieldsPlugin, qparser.RangePlugin, qparser.BoostPlugin,
    qparser.EveryPlugin, qparser.SingleQuotePlugin, qparser.PhrasePlugin, qparser.OperatorsPlugin,
)


def make_schema(title_boost: float = TITLE_BOOST, aliases_boost: float = ALIASES_BOOST) -> Schema:
    """title (stored, boosted), aliases (boosted), body; stemmed, stopwords removed."""
    return Schema(
        title=WikiText(field_boost=title_boost, stored=True),
        aliases=WikiText(field_boost=aliases_boost),
        body=WikiText(),
    )


def _codec() -> W3Codec:
    codec = W3Codec()
    # Per-block field-length statistics only sharpen the block-skipping bounds; computing
    # them costs a column lookup per posting (a third of the write time). Without them the
    # bounds stay valid (length 0 gives an upper bound).
    codec.length_stats = False
    return codec


def _documents(store_path: Path, lo: int, hi: int) -> Iterator[dict[str, str]]:
    """Index documents for pages with ``lo <= id < hi``, in id order."""
    conn = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT p.title, p.text, (SELECT group_concat(r.alias, char(10)) FROM redirects r"
            " WHERE r.target = p.title) FROM pages p WHERE p.id >= ? AND p.id < ? ORDER BY p.id", (lo, hi))
        for title, text, aliases in rows:
            yield {"title": title, "aliases": aliases or "", "body": text}
    finally:
        conn.close()


def _slices(store_path: Path, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous page-id ranges holding about equal amounts of text."""
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT id, length(text) + 200 FROM pages ORDER BY id").fetchall()
    if not rows:
        return []
    total = sum(n for _, n in rows)
    bounds = [rows[0][0]]
    acc = 0
    for pid, n in rows:
        if acc >= total * len(bounds) / parts and len(bounds) < parts:
            bounds.append(pid)
        acc += n
    bounds.append(rows[-1][0] + 1)
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if a < b]


def _write_slice(index_dir: str, store_path: str, lo: int, hi: int, limitmb: int, counter: Any,
                 results: Any, parent: int) -> None:
    """Writer process: index one slice of pages into a new segment; send it to the parent."""
    try:
        ix = whoosh_index.open_dir(index_dir)
        # _lk=False: the parent holds no lock and the workers write disjoint segments,
        # exactly as Whoosh's own multiprocessing writer does.
        writer = SegmentWriter(ix, _lk=False, codec=_codec(), limitmb=limitmb)
        pending = 0
        for doc in _documents(Path(store_path), lo, hi):
            writer.add_document(**doc)
            pending += 1
            if pending == 100:
                if os.getppid() != parent:  # the build was killed: stop, leave no orphan
                    os._exit(1)
                with counter.get_lock():
                    counter.value += pending
                pending = 0
        with counter.get_lock():
            counter.value += pending
        segment = writer._finalize_segment()
        results.put((lo, segment, None))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        results.put((lo, None, f"{type(exc).__name__}: {exc}"))


def build_index(store_path: str | Path, index_dir: str | Path, *, procs: int = 2, progress: bool = True,
                limitmb: int = 256) -> dict[str, Any]:
    """Index every page of a finalized store into a new Whoosh index at ``index_dir``.

    ``procs`` writer processes each index a slice of the pages into a segment; the parent
    merges the segments into the index. Returns ``{"documents", "segments", "seconds"}``;
    raises :class:`WikiSimError` if a writer fails or the index does not hold every page.
    """
    from tqdm import tqdm

    store_path, index_dir = Path(store_path), Path(index_dir)
    start = time.perf_counter()
    index_dir.mkdir(parents=True, exist_ok=False)
    schema = make_schema()
    ix = whoosh_index.create_in(str(index_dir), schema)
    slices = _slices(store_path, max(1, procs))
    total = sum(1 for _ in _ids(store_path))
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    results = ctx.Queue()
    workers = [ctx.Process(target=_write_slice, daemon=True,
                           args=(str(index_dir), str(store_path), lo, hi, limitmb, counter, results, os.getpid()))
               for lo, hi in slices]
    segments: dict[int, Any] = {}
    try:
        for w in workers:
            w.start()
        with tqdm(total=total, desc="index", unit="page", disable=not progress, mininterval=0.5) as bar:
            while len(segments) < len(workers):
                try:
                    lo, segment, error = results.get(timeout=0.2)
                except Exception:  # queue.Empty
                    dead = [w for w in workers if w.exitcode not in (None, 0)]
                    if dead:
                        raise WikiSimError(f"an index writer process died (exit code {dead[0].exitcode})") from None
                else:
                    if error:
                        raise WikiSimError(f"index writer failed: {error}")
                    segments[lo] = segment
                bar.update(counter.value - bar.n)
        for w in workers:
            w.join()
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
                w.join()
    from whoosh.index import TOC

    TOC(schema, [segments[lo] for lo, _ in slices], 1).write(ix.storage, ix.indexname)
    for tmp in index_dir.glob("*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    ix = whoosh_index.open_dir(str(index_dir))
    with ix.searcher() as s:
        indexed = s.doc_count()
    if indexed != total:
        raise WikiSimError(f"index holds {indexed} documents but the store has {total} pages; rebuild")
    return {"documents": indexed, "segments": len(slices), "seconds": round(time.perf_counter() - start, 3)}


def _ids(store_path: Path) -> Iterator[int]:
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as conn:
        yield from (r[0] for r in conn.execute("SELECT id FROM pages"))


class DocumentIdfBM25F(scoring.BM25F):
    """Whoosh's BM25F with a document-level idf, as BM25F defines it, and cached lengths.

    Whoosh computes idf per field, and a word is rare in titles even when common in the
    text (``unit``: in 10 titles, 500 bodies), so any title match outweighed several rarer
    body matches. Here a term's idf counts the documents having it in the body or in the
    scored field (the larger of the two document frequencies, a lower bound of the union).
    Measured on the default corpus (1,000 title-less queries, seed 1): recall@10
    0.989 -> 0.998, MRR 0.936 -> 0.964; queries naming the title unchanged.

    Field lengths (BM25's length normalization) are read once per segment into an array
    for indexes up to ``max_cached_docs`` documents, instead of from the column file for
    every posting scored.
    """

    def __init__(self, *args: Any, max_cached_docs: int = ARRAY_MATCHER_MAX_DOCS, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.max_cached_docs = max_cached_docs
        self._lengths: dict[tuple[int, str], array] = {}

    def idf(self, searcher, fieldname, text):
        parent = searcher.get_parent()
        df = parent.doc_frequency(fieldname, text)
        if fieldname != "body":
            df = max(df, parent.doc_frequency("body", text))
        return log(parent.doc_count_all() / (df + 1)) + 1

    def scorer(self, searcher, fieldname, text, qf=1):
        scorer = super().scorer(searcher, fieldname, text, qf=qf)
        if isinstance(scorer, scoring.BM25FScorer):
            lengths = self._field_lengths(searcher, fieldname)
            if lengths is not None:
                scorer.dfl = lengths.__getitem__
        return scorer

    def _field_lengths(self, searcher, fieldname: str) -> array | None:
        reader = searcher.reader()
        n = reader.doc_count_all()
        if n > self.max_cached_docs:
            return None
        key = (id(reader), fieldname)
        lengths = self._lengths.get(key)
        if lengths is None:
            # Whoosh returns None (not the default) for an empty field, which is never scored.
            lengths = self._lengths[key] = array(
                "I", (reader.doc_field_length(i, fieldname, 1) or 1 for i in range(n)))
        return lengths


def _use_array_matchers(query: Any) -> Any:
    """Mark every OR node of a parsed query to use the preloaded-array matcher."""
    if isinstance(query, Or):
        query.matcher_type = Or.ARRAY_MATCHER
    for sub in getattr(query, "subqueries", ()):
        _use_array_matchers(sub)
    return query


class IndexSearcher:
    """One open Whoosh index and searcher, shared by all threads.

    Whoosh matchers read through shared per-segment readers, so searches are serialized
    with a lock; the work is pure Python under the GIL anyway, so the lock costs little.
    """

    def __init__(self, index_dir: str | Path, group_factor: float = 0.9):
        self.index_dir = Path(index_dir)
        if not whoosh_index.exists_in(str(self.index_dir)):
            raise WikiSimError(f"no search index at {self.index_dir}; rebuild with `websailor wiki build`")
        self.ix = whoosh_index.open_dir(str(self.index_dir))
        self._searcher = self.ix.searcher(weighting=DocumentIdfBM25F())
        # The coordination bonus (factor) only applies on the union-tree path.
        self._parser = qparser.MultifieldParser(list(SEARCH_FIELDS), self.ix.schema,
                                                group=qparser.OrGroup.factory(group_factor))
        for plugin in _DROPPED_PLUGINS:
            self._parser.remove_plugin_class(plugin)
        self._array = self._searcher.doc_count_all() <= ARRAY_MATCHER_MAX_DOCS
        self._lock = threading.Lock()

    def doc_count(self) -> int:
        return self._searcher.doc_count()

    def search(self, query: str, k: int = 10) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """The top ``k`` (title, score) for ``query``, and the query terms' body idf."""
        with self._lock:
            parsed = self._parser.parse(query)
            if self._array:
                parsed = _use_array_matchers(parsed)
            weights: dict[str, float] = {}
            for field, text in parsed.iter_all_terms():
                term = text.decode("utf-8") if isinstance(text, bytes) else text
                if field == "body":
                    weights[term] = self._searcher.idf("body", term)
                else:
                    weights.setdefault(term, 1.0)
            results = self._searcher.search(parsed, limit=k)
            hits = [(hit["title"], float(hit.score)) for hit in results]
        return hits, weights

    def close(self) -> None:
        self._searcher.close()
        self.ix.close()
