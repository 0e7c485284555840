"""The simulator's Whoosh index: schema, parallel build from the store, search.

Scoring is BM25F over three fields: the title (boosted), the page's aliases (its redirects,
boosted) and the body. Agent queries are long natural-language strings, so terms are joined
with OR (AND would return nothing). A query is only its words, through the index's
analyzer (:func:`query_terms`): ``?`` and ``*`` are not wildcards, ``word:`` is not a field,
``^`` is not a boost, AND/OR/NOT are ordinary words. Every word counts; pages matching
more of them rank higher. :class:`IndexSearcher` computes the scores with numpy from
Whoosh's postings (cached per term); phrases, titles and spelling are handled above it,
in :mod:`wiki_sim.search`.

Building: the pages are split into ``procs`` contiguous slices; one writer process per
slice analyzes its pages and writes segments, and the parent joins the segments into one
index (one table of contents). A writer keeps a segment's postings in memory and closes the
segment when they reach its share of the memory budget (``memory_bytes``), then starts the
next: Whoosh's own writer would instead spill sorted runs to temporary files (about 25x
the final index on disk at 1M pages) and merge them. So a build's memory does not grow
with the corpus and it writes no temporary postings; a large corpus gets more segments
(searched one after another: a few term look-ups each per query term). The segments are
not merged into one: Whoosh merges posting by posting in Python (about 2x the CPU of a
single writer on the default corpus) through the same spilling pool.
Field lengths, which the searcher needs for every document, are written beside the index
as a memory-mapped array (``lengths.i32``), so opening reads no per-document data.
"""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import shutil
import sqlite3
import threading
import time
from array import array
from math import log
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from whoosh import index as whoosh_index
from whoosh import qparser, scoring
from whoosh.codec.whoosh3 import W3Codec
from whoosh.fields import Schema
from whoosh.query import Or
from whoosh.reading import TermNotFound
from whoosh.writing import SegmentWriter

from wiki_sim.analysis import WikiText, analyze
from wiki_sim.budget import check_budget, resident_bytes
from wiki_sim.errors import WikiSimError
from wiki_sim.score_table import SCORES_DIR, open_score_table, write_score_table
from wiki_sim.spelling import edit_distance, letters_apart, open_spelling_index
from wiki_sim.term_cache import TermCache
from wiki_sim.whoosh_mmap import read_segments_in_place
from wiki_sim.whoosh_safe import index_exists, open_index

INDEX_DIR = "index"
# A title or alias match counts 1.5 occurrences (a term frequency, so it saturates like any
# BM25 term). Tuned on query sets other than the benchmark's (benchmarks/search.py, seeds 1
# and 2): 3.0 ranked any page with a query word in its title above the page described.
TITLE_BOOST = 1.5
ALIASES_BOOST = 1.5
SEARCH_FIELDS = ("title", "aliases", "body")
# At search time a title or alias match counts this many occurrences instead (the index
# keeps TITLE_BOOST; IndexSearcher rescales). Measured with the re-ranking of
# wiki_sim/search.py, which lifts pages whose title the query is, on benchmarks/search.py
# seed 1 (targets are read on seed 0): 1.5 -> 0.5 raised description recall@10 0.800 ->
# 0.813, MRR 0.556 -> 0.60; title-plus-keyword queries unchanged (recall 1.0).
HEAD_BOOST = 0.5
# BM25's length normalization at search time (Whoosh's default 0.75 favoured short pages
# too much on short-description queries; seeds 1 and 2: description recall@10 +0.015/+0.033).
LENGTH_B = 0.5
# Below this many documents an OR query preloads its matches into a score array, which is
# about 2x faster here than Whoosh's tree of union matchers; above it the tree's skipping
# of low-scoring blocks wins (the array scan is linear in the index size).
ARRAY_MATCHER_MAX_DOCS = 100_000
DEFAULT_TERM_CACHE_BYTES = 256 * 2 ** 20
"""Default bound on the per-term score arrays a searcher caches (bytes, per process)."""
# Bytes counted per cached term besides its arrays (the key, two array headers, the entry).
_ENTRY_OVERHEAD = 400
# Bounds on a query: characters read and distinct terms scored.
MAX_QUERY_CHARS = 4000
MAX_QUERY_TERMS = 32
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
    """``parts`` contiguous page-id ranges holding about equal amounts of text (two streaming
    passes over the page lengths; nothing per page is kept)."""
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as conn:
        total, first, last = conn.execute("SELECT SUM(length(text) + 200), MIN(id), MAX(id) FROM pages").fetchone()
        if not total:
            return []
        bounds = [first]
        acc = 0
        for pid, n in conn.execute("SELECT id, length(text) + 200 FROM pages ORDER BY id"):
            if acc >= total * len(bounds) / parts and len(bounds) < parts:
                bounds.append(pid)
            acc += n
    bounds.append(last + 1)
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if a < b]


# A writer process's own memory besides its postings (Python, Whoosh, SQLite, one page).
WRITER_BASE_BYTES = 80 * 2 ** 20
# Resident bytes per byte of Whoosh's own estimate of its buffered postings (measured).
POOL_OVERHEAD = 1.5
DEFAULT_MEMORY_BYTES = 1024 * 2 ** 20
"""The whole build's default memory budget (``websailor wiki build --memory-mb``)."""
MIN_POOL_BYTES = 64 * 1024
LENGTHS_FILE = "lengths.i32"


def pool_bytes(memory_bytes: int, procs: int, parent_bytes: int = WRITER_BASE_BYTES) -> int:
    """Postings one of ``procs`` writers may buffer (Whoosh's estimate) within ``memory_bytes``,
    the build process itself holding ``parent_bytes``."""
    share = (memory_bytes - parent_bytes - procs * WRITER_BASE_BYTES) / max(1, procs) / POOL_OVERHEAD
    return max(MIN_POOL_BYTES, int(share))


def _write_slice(index_dir: str, store_path: str, lo: int, hi: int, pool_limit: int, counter: Any,
                 results: Any, parent: int) -> None:
    """Writer process: index one slice of pages into segments of at most ``pool_limit``
    buffered postings each; send them to the parent."""
    try:
        ix = open_index(index_dir, make_schema())
        # Whoosh's pool never spills (its limit is far above ours): the segment is closed first.
        limitmb = max(1, 4 * pool_limit // 2 ** 20)
        writer, segments, pending = None, [], 0
        for doc in _documents(Path(store_path), lo, hi):
            if writer is None:
                # _lk=False: the parent holds no lock and the workers write disjoint segments,
                # exactly as Whoosh's own multiprocessing writer does.
                writer = SegmentWriter(ix, _lk=False, codec=_codec(), limitmb=limitmb)
            writer.add_document(**doc)
            pending += 1
            if writer.pool.currentsize >= pool_limit:
                segments.append(writer._finalize_segment())
                writer = None
            if pending == 100:
                if os.getppid() != parent:  # the build was killed: stop, leave no orphan
                    os._exit(1)
                with counter.get_lock():
                    counter.value += pending
                pending = 0
        with counter.get_lock():
            counter.value += pending
        if writer is not None:
            segments.append(writer._finalize_segment())
        results.put((lo, segments, None))
    except MemoryError:
        results.put((lo, None, "out of memory"))
    except OSError as exc:
        results.put((lo, None, "no space left on device" if exc.errno == errno.ENOSPC else f"OSError: {exc}"))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        results.put((lo, None, f"{type(exc).__name__}: {exc}"))


def build_index(store_path: str | Path, index_dir: str | Path, *, procs: int = 2, progress: bool = True,
                memory_bytes: int | None = None) -> dict[str, Any]:
    """Index every page of a finalized store into a new Whoosh index at ``index_dir``.

    ``procs`` writer processes each index a slice of the pages into segments, each holding
    at most its share of ``memory_bytes`` in memory (``None``: :data:`DEFAULT_MEMORY_BYTES`
    above what this process already holds, as :func:`wiki_sim.build.build` counts it); the parent joins the segments into the
    index and writes the field lengths beside it. Returns ``{"documents", "segments",
    "seconds"}``; raises :class:`WikiSimError` if a writer fails or the index does not hold
    every page.
    """
    from tqdm import tqdm

    store_path, index_dir = Path(store_path), Path(index_dir)
    start = time.perf_counter()
    index_dir.mkdir(parents=True, exist_ok=False)
    schema = make_schema()
    ix = whoosh_index.create_in(str(index_dir), schema)
    slices = _slices(store_path, max(1, procs))
    total = sum(1 for _ in _ids(store_path))
    procs = len(slices) or 1
    if memory_bytes is None:
        memory_bytes = resident_bytes() + DEFAULT_MEMORY_BYTES
    if memory_bytes > 0:  # 0: the smallest segments (tests)
        check_budget(memory_bytes, procs * (WRITER_BASE_BYTES + 8 * 2 ** 20), "indexing")
    pool_limit = pool_bytes(memory_bytes, procs, resident_bytes())
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    results = ctx.Queue()
    workers = [ctx.Process(target=_write_slice, daemon=True,
                           args=(str(index_dir), str(store_path), lo, hi, pool_limit, counter, results, os.getpid()))
               for lo, hi in slices]
    segments: dict[int, Any] = {}
    try:
        for w in workers:
            w.start()
        with tqdm(total=total, desc="index", unit="page", disable=not progress, mininterval=0.5) as bar:
            while len(segments) < len(workers):
                try:
                    lo, written, error = results.get(timeout=0.2)
                except Exception:  # queue.Empty
                    dead = [w for w in workers if w.exitcode not in (None, 0)]
                    if dead:
                        killed = " (killed: out of memory?)" if dead[0].exitcode == -9 else ""
                        raise WikiSimError(f"an index writer process died (exit code {dead[0].exitcode}){killed}") \
                            from None
                else:
                    if error:
                        raise WikiSimError(f"index writer failed: {error}")
                    segments[lo] = written
                bar.update(counter.value - bar.n)
        for w in workers:
            w.join()
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
                w.join()
    from whoosh.index import TOC

    ordered = [seg for lo, _ in slices for seg in segments[lo]]
    TOC(schema, ordered, 1).write(ix.storage, ix.indexname)
    for tmp in index_dir.glob("*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
    ix = open_index(index_dir, schema)
    with ix.searcher() as s:
        indexed = s.doc_count()
        _write_lengths(s.reader(), index_dir)
    if indexed != total:
        raise WikiSimError(f"index holds {indexed} documents but the store has {total} pages; rebuild")
    table = build_score_table(index_dir, indexed, progress)
    return {"documents": indexed, "segments": len(ordered), "score_table": table,
            "seconds": round(time.perf_counter() - start, 3)}


def build_score_table(index_dir: Path, documents: int, progress: bool = False) -> dict[str, Any]:
    """Write the score table (:mod:`wiki_sim.score_table`) of the index at ``index_dir``: every
    term's scores as :class:`IndexSearcher` computes them with its default parameters. Returns
    ``{"terms", "postings", "seconds"}``."""
    from tqdm import tqdm

    start = time.perf_counter()
    searcher = IndexSearcher(index_dir, titles=[""] * documents, max_cache_bytes=0)
    try:
        with tqdm(desc="scores", unit="term", disable=not progress, mininterval=0.5) as bar:
            def compute(term: str) -> tuple[np.ndarray, np.ndarray, float]:
                bar.update()
                return searcher._compute_term(term)

            info = write_score_table(index_dir / SCORES_DIR, _index_terms(searcher._reader), compute,
                                     searcher.score_params(), documents)
    finally:
        searcher.close()
    return {**info, "seconds": round(time.perf_counter() - start, 3)}


def _index_terms(reader: Any) -> Iterator[str]:
    """The distinct terms of the searched fields, in UTF-8 byte order."""
    import heapq

    last = None
    for raw in heapq.merge(*(reader.lexicon(field) for field in SEARCH_FIELDS)):
        if raw != last:
            last = raw
            yield _text(raw)


def _write_lengths(reader: Any, index_dir: Path) -> None:
    """Write every document's field lengths (``SEARCH_FIELDS`` order, one block of
    ``doc_count`` each) as ``lengths.i32``, for :class:`IndexSearcher` to map."""
    from wiki_sim.tables import ArrayWriter

    out = ArrayWriter(index_dir / LENGTHS_FILE)
    leaves = [seg for seg, _ in reader.leaf_readers()] or [reader]
    for field in SEARCH_FIELDS:
        for seg in leaves:
            n = seg.doc_count_all()
            out.extend(np.fromiter((seg.doc_field_length(i, field, 1) or 1 for i in range(n)), np.int64, n))
    out.close()


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


def whoosh_parser(ix: Any, group_factor: float = 0.9) -> qparser.QueryParser:
    """Whoosh's own OR-grouped multifield parser with the syntax plugins dropped (the
    reference the fast scorer is tested against)."""
    parser = qparser.MultifieldParser(list(SEARCH_FIELDS), ix.schema, group=qparser.OrGroup.factory(group_factor))
    for plugin in _DROPPED_PLUGINS:
        parser.remove_plugin_class(plugin)
    return parser


def _read_postings(matcher: Any) -> tuple[np.ndarray, np.ndarray]:
    """All (segment doc ids, weights) of a Whoosh postings matcher, block by block.

    Whoosh's W3 blocks are decoded with numpy (ids are stored as deltas); any other
    matcher is read posting by posting."""
    ids: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    if all(hasattr(matcher, a) for a in ("_read_data", "_next_block", "_byteids", "_blocklength")):
        while matcher.is_active():
            matcher._read_data()
            raw_ids, raw_weights = matcher._data[0], matcher._data[1]
            block_ids = np.asarray(raw_ids, dtype=np.int64)
            ids.append(block_ids if matcher._byteids else np.cumsum(block_ids))
            if raw_weights is None or isinstance(raw_weights, float):
                weights.append(np.full(matcher._blocklength, 1.0 if raw_weights is None else raw_weights))
            else:
                weights.append(np.asarray(raw_weights, dtype=np.float64))
            matcher._next_block()
    else:
        pairs = []
        while matcher.is_active():
            pairs.append((matcher.id(), matcher.weight()))
            matcher.next()
        if pairs:
            ids.append(np.array([p[0] for p in pairs], dtype=np.int64))
            weights.append(np.array([p[1] for p in pairs], dtype=np.float64))
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    return np.concatenate(ids), np.concatenate(weights)


class IndexSearcher:
    """BM25F search over a Whoosh index with per-term score arrays, safe in any number of threads.

    The scores are exactly :class:`DocumentIdfBM25F`'s (title and alias matches count as
    boosted term frequencies, ``head_boost`` each; document-level idf), summed over the query's terms as
    Whoosh's OR query does, but computed with numpy: a term's BM25F contribution to every
    document holding it depends only on the index, so it is computed once from the
    postings (read with Whoosh) and cached; a query then adds a few arrays and takes the
    top ``k``. Only a cache miss reads the index, under a lock (Whoosh's file handles are
    shared); everything else runs concurrently. Titles (the simulator's shared title table
    when given), field lengths (``lengths.i32``) and the segment files
    (:mod:`wiki_sim.whoosh_mmap`) are memory-mapped, not loaded; the term cache holds at
    most ``max_cache_bytes`` of arrays, least recently used terms dropped first.
    """

    def __init__(self, index_dir: str | Path, B: float = LENGTH_B, K1: float = 1.2,
                 head_boost: float = HEAD_BOOST, titles: Sequence[str] | None = None,
                 max_cache_bytes: int = DEFAULT_TERM_CACHE_BYTES):
        self.index_dir = Path(index_dir)
        if not index_exists(self.index_dir):
            raise WikiSimError(f"no search index at {self.index_dir}; rebuild with `websailor wiki build`")
        self._idf: dict[str, float] = {}  # of the cached terms only (dropped with them)
        read_segments_in_place()  # the segment files shared through the page cache, not copied
        self._terms = TermCache(max_cache_bytes, on_evict=lambda term: self._idf.pop(term, None))
        self.ix = open_index(self.index_dir, make_schema())
        self._searcher = self.ix.searcher(weighting=DocumentIdfBM25F())
        self._reader = self._searcher.reader()
        self.B, self.K1 = B, K1
        self.head_boost = head_boost
        self._n = self._reader.doc_count_all()
        self._segments = [(seg, offset) for seg, offset in self._reader.leaf_readers()] or [(self._reader, 0)]
        if titles is not None and len(titles) == self._n:
            self.titles: Sequence[str] = titles  # the simulator's shared, memory-mapped title table
        else:
            self.titles = [""] * self._n
            for docnum, fields in self._reader.iter_docs():
                self.titles[docnum] = fields.get("title", "")
        self._lengths = self._mapped_lengths()
        if self._lengths is None:
            self._lengths = {f: self._field_lengths(f) for f in SEARCH_FIELDS}
        self._avgfl = {f: self._searcher.avg_field_length(f) or 1 for f in SEARCH_FIELDS}
        self._boost = {f: self.ix.schema[f].format.field_boost for f in SEARCH_FIELDS}
        self._lock = threading.Lock()
        self._table = open_score_table(self.index_dir / SCORES_DIR, self.score_params(), self._n)
        self._speller: Any = None  # the spelling index, opened on the first unknown word
        self._speller_lock = threading.Lock()

    @property
    def max_cache_bytes(self) -> int:
        return self._terms.max_bytes

    @property
    def cache_bytes(self) -> int:
        """Bytes the term cache holds now (its arrays and :data:`_ENTRY_OVERHEAD` per term)."""
        return self._terms.bytes

    def _mapped_lengths(self) -> dict[str, np.ndarray] | None:
        """The field lengths the build wrote beside the index, memory-mapped (``None`` if absent)."""
        from wiki_sim.tables import open_array

        path = self.index_dir / LENGTHS_FILE
        if not path.is_file():
            return None
        lengths = open_array(path)
        if len(lengths) != len(SEARCH_FIELDS) * self._n:
            return None
        return {f: lengths[i * self._n:(i + 1) * self._n] for i, f in enumerate(SEARCH_FIELDS)}

    def doc_count(self) -> int:
        return self._searcher.doc_count()

    def doc_frequency(self, term: str) -> int:
        """Documents holding ``term`` in any field (the largest per-field count)."""
        with self._lock:
            return max(self._reader.doc_frequency(f, term) for f in SEARCH_FIELDS)

    def score_params(self) -> dict[str, float]:
        """The parameters a term's scores depend on (a score table is used only when they match)."""
        return {"B": self.B, "K1": self.K1, "head_boost": self.head_boost}

    @property
    def has_score_table(self) -> bool:
        """Whether term scores come from the build's score table (:mod:`wiki_sim.score_table`)."""
        return self._table is not None

    def idf(self, term: str) -> float:
        """The body idf of ``term`` (the snippet weight), as the scorer uses it."""
        if self._table is not None:
            return self._table.idf(term)
        idf = self._idf.get(term)
        if idf is None:  # not kept: only the cached terms' idf are (a bounded number)
            with self._lock:
                idf = log(self._n / (self._reader.doc_frequency("body", term) + 1)) + 1
        return idf

    def _term_idf(self, df: int) -> float:
        """Whoosh's BM25 idf, from a document frequency."""
        return log(self._n / (df + 1)) + 1

    def term_scores(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(doc numbers, BM25F score) of every document holding ``term``, summed over the fields:
        from the score table when the build wrote one, else from Whoosh's postings (cached)."""
        if self._table is not None:
            return self._table.scores(term)
        cached = self._terms.get(term)
        if cached is not None:
            return cached
        with self._lock:
            cached = self._terms.get(term)
            if cached is not None:
                return cached
            ids, scores, body_idf = self._compute_term(term)
            entry = (ids, scores)
            # Larger than the whole cache: answered, not kept.
            if self._terms.put(term, entry, ids.nbytes + scores.nbytes + _ENTRY_OVERHEAD):
                self._idf[term] = body_idf
        return entry

    def _compute_term(self, term: str) -> tuple[np.ndarray, np.ndarray, float]:
        """(doc numbers, BM25F scores, body idf) of ``term`` from Whoosh's postings (under the lock)."""
        found = []  # (field, segment, offset) holding the term
        df = dict.fromkeys(SEARCH_FIELDS, 0)
        for field in SEARCH_FIELDS:
            for seg, offset in self._segments:
                try:
                    df[field] += seg.term_info(field, term).doc_frequency()
                except TermNotFound:
                    continue
                found.append((field, seg, offset))
        body_idf = self._term_idf(df["body"])
        parts_ids, parts_scores = [], []
        for field, seg, offset in found:
            idf = self._term_idf(max(df[field], df["body"]))
            ids, tf = _read_postings(seg.postings(field, term))
            if field != "body":  # the index's boost replaced by the search-time one
                tf = tf * (self.head_boost / self._boost[field])
            ids = ids + offset
            fl = self._lengths[field][ids]
            parts_ids.append(ids)
            parts_scores.append(idf * (tf * (self.K1 + 1))
                                / (tf + self.K1 * ((1 - self.B) + self.B * fl / self._avgfl[field])))
        if len({field for field, _, _ in found}) > 1:  # a document may hold it in two fields
            uniq, inverse = np.unique(np.concatenate(parts_ids), return_inverse=True)
            return uniq, np.bincount(inverse, weights=np.concatenate(parts_scores)), body_idf
        if parts_ids:  # segments hold disjoint, increasing doc ranges
            return np.concatenate(parts_ids), np.concatenate(parts_scores), body_idf
        return np.zeros(0, np.int64), np.zeros(0, np.float64), body_idf

    def known(self, term: str) -> bool:
        """Whether any document holds ``term``."""
        return len(self.term_scores(term)[0]) > 0

    def candidates(self, terms: list[str], n: int) -> list[tuple[int, float]]:
        """The top ``n`` (document number, score) for a query's distinct index terms;
        document numbers follow the store's page order (``titles[docnum]``)."""
        arrays = [a for a in map(self.term_scores, terms) if len(a[0])]
        if not arrays:
            return []
        if len(arrays) == 1:
            ids, scores = arrays[0]
        else:
            ids, inverse = np.unique(np.concatenate([a[0] for a in arrays]), return_inverse=True)
            scores = np.bincount(inverse, weights=np.concatenate([a[1] for a in arrays]))
        return [(int(ids[i]), float(scores[i])) for i in top_indices(scores, ids, n)]

    def suggest(self, term: str) -> str | None:
        """The indexed term closest in spelling to ``term`` (edit distance 1, or 2 for
        words of 5+ letters; same first letter; ties go to the term with the same letters,
        then to the commoner term), ``None`` if none is close: through the simulator's
        deletion index (:mod:`wiki_sim.spelling`, opened or built on first use), whose
        cost does not grow with the vocabulary as :meth:`suggest_by_scan`'s does."""
        if self._speller is None:
            with self._speller_lock:  # not self._lock: vocabulary() takes that one
                if self._speller is None:
                    self._speller = open_spelling_index(self.index_dir.parent, self.vocabulary)
        return self._speller.suggest(term)

    def vocabulary(self) -> list[tuple[str, int]]:
        """Every term of the title and body fields with its body document frequency (0 for a
        title-only term), the order the spelling index keeps."""
        with self._lock:
            return reader_vocabulary(self._reader)

    def suggest_by_scan(self, term: str) -> str | None:
        """:meth:`suggest` by Whoosh's scan of every term with the same first letter (the
        reference the deletion index is tested against)."""
        maxdist = 2 if len(term) >= 5 else 1
        best: tuple[int, int, int, str] | None = None
        with self._lock:
            for field in ("title", "body"):
                for cand in self._reader.terms_within(field, term, maxdist, prefix=1):
                    cand = _text(cand)
                    if cand == term:
                        continue
                    key = (edit_distance(term, cand), letters_apart(term, cand),
                           -self._reader.doc_frequency("body", cand), cand)
                    if best is None or key < best:
                        best = key
        return best[-1] if best else None

    def search(self, query: str, k: int = 10) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """The plain BM25F top ``k`` (title, score) for ``query``, and its terms' body idf."""
        terms = query_terms(query)
        hits = [(self.titles[d], s) for d, s in self.candidates(terms, k)]
        return hits, {t: self.idf(t) for t in terms if self.known(t)}

    def close(self) -> None:
        self._searcher.close()
        self.ix.close()


def query_terms(query: str, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct index terms of a query, in order; past ``max_terms`` the rest are
    dropped (a hostile query of thousands of words costs no more than a long one). A
    repeated word counts once, as in Whoosh's OR query."""
    terms: dict[str, None] = {}
    for term in analyze(query[:MAX_QUERY_CHARS]):
        if len(terms) >= max_terms:
            break
        terms[term] = None
    return list(terms)


def top_indices(scores: np.ndarray, ids: np.ndarray, n: int) -> list[int]:
    """Positions of the ``n`` highest scores, best first; ties go to the lower doc number."""
    if len(scores) > n:
        part = np.argpartition(-scores, n - 1)[:n]
    else:
        part = np.arange(len(scores))
    order = np.lexsort((ids[part], -scores[part]))
    return part[order].tolist()


def _text(term: str | bytes) -> str:
    return term.decode("utf-8") if isinstance(term, bytes) else term


def reader_vocabulary(reader: Any) -> list[tuple[str, int]]:
    """Every term of a Whoosh reader's title and body fields with its body document frequency
    (0 for a title-only term)."""
    df: dict[str, int] = {}
    for field in ("title", "body"):
        for term in reader.lexicon(field):
            term = _text(term)
            if term not in df:
                df[term] = reader.doc_frequency("body", term)
    return list(df.items())


def index_vocabulary(index_dir: str | Path) -> list[tuple[str, int]]:
    """:func:`reader_vocabulary` of the Whoosh index in ``index_dir``."""
    with open_index(Path(index_dir), make_schema()).reader() as reader:
        return reader_vocabulary(reader)
