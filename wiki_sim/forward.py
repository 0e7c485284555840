"""The forward index: each page as an array of term ids, for proximity at search time.

Built with the simulator (``terms/`` beside the store, for either engine): page ``i`` in the
store's page order (the engines' document order) is ``ids[offsets[i]:offsets[i + 1]]``:
its title's terms, a 0 (the separator), then the terms of the first
:data:`FORWARD_CHARS` characters of its text (stopwords dropped, Porter stems, the
analyzer of the index). Term ids are ranks in the sorted vocabulary (``vocab``, a string
table; id 0 is the empty separator). ``titles`` is the page titles in the same order, for
both engines. Every file is a memory-mapped table (:mod:`wiki_sim.tables`): opening costs
nothing, and every process on a machine shares one copy through the page cache.

Built in bounded memory: pages are analyzed in chunks of at most ``memory_bytes`` worth of
term ids, each chunk written with its own sorted vocabulary; the chunk vocabularies are then
merged into one (a streaming k-way merge) and each chunk's ids remapped to the merged ids.
Temporary disk: about the size of the final ``ids`` file.
"""

from __future__ import annotations

import heapq
import shutil
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

import numpy as np

from wiki_sim.analysis import analyze
from wiki_sim.tables import ArrayWriter, StringTable, StringTableWriter, open_array

FORWARD_DIR = "terms"
# Characters of a page whose terms are kept (long articles: their beginning).
FORWARD_CHARS = 20_000
# Memory a forward-index build may use for one chunk, by default.
DEFAULT_MEMORY_BYTES = 128 * 2 ** 20
# Bytes of build memory per buffered term position (an int32 id plus list overhead).
_BYTES_PER_POSITION = 16


def page_terms(title: str, text: str) -> list[str]:
    """A page's terms as the forward index keeps them ("" separates title and text)."""
    return analyze(title) + [""] + analyze(text[:FORWARD_CHARS])


def _write_chunk(tmp: Path, k: int, vocab: dict[str, int], ids: list[np.ndarray]) -> None:
    """Write a chunk's ids renumbered to ranks in its sorted vocabulary, and that vocabulary."""
    terms = sorted(vocab, key=lambda t: t.encode("utf-8", "surrogatepass"))
    rank = np.empty(len(vocab), dtype=np.int32)
    rank[[vocab[t] for t in terms]] = np.arange(len(terms), dtype=np.int32)
    (rank[np.concatenate(ids)] if ids else np.zeros(0, np.int32)).astype("<i4").tofile(tmp / f"{k}.ids")
    with open(tmp / f"{k}.vocab", "w", encoding="utf-8", errors="surrogatepass", newline="\n") as f:
        for t in terms:
            f.write(t + "\n")


def _chunk_terms(tmp: Path, k: int) -> Iterator[tuple[bytes, int, int]]:
    with open(tmp / f"{k}.vocab", "rb") as f:
        for rank, line in enumerate(f):
            yield line[:-1], k, rank


def _merge_vocabularies(tmp: Path, chunks: int, out_dir: Path) -> int:
    """Merge the chunks' sorted vocabularies into ``vocab``; write each chunk's map
    (chunk rank -> merged id) as ``K.map``; return the vocabulary size."""
    sizes = [sum(1 for _ in open(tmp / f"{k}.vocab", "rb")) for k in range(chunks)]
    maps = [np.lib.format.open_memmap(tmp / f"{k}.map", mode="w+", dtype=np.int32, shape=(sizes[k],))
            for k in range(chunks)]
    writer = StringTableWriter(out_dir, "vocab")
    last: bytes | None = None
    n = -1
    for term, k, rank in heapq.merge(*(_chunk_terms(tmp, k) for k in range(chunks))):
        if term != last:
            writer.append(term.decode("utf-8", "surrogatepass"))
            last, n = term, n + 1
        maps[k][rank] = n
    writer.close()
    for m in maps:
        m.flush()
    del maps
    return n + 1


def build_forward_index(store_path: str | Path, out_dir: str | Path,
                        memory_bytes: int = DEFAULT_MEMORY_BYTES) -> dict[str, int]:
    """Write the forward index and title table of every page of a finalized store into
    ``out_dir``, holding at most about ``memory_bytes`` of term ids at a time."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=False)
    tmp = out_dir / ".chunks"
    tmp.mkdir()
    max_positions = max(4096, memory_bytes // _BYTES_PER_POSITION)
    titles = StringTableWriter(out_dir, "titles")
    offsets = ArrayWriter(out_dir / "offsets.i64")
    offsets.append(0)
    chunks, positions, total = 0, 0, 0
    vocab: dict[str, int] = {"": 0}
    ids: list[np.ndarray] = []
    conn = sqlite3.connect(f"file:{Path(store_path)}?mode=ro", uri=True)
    try:
        for title, text in conn.execute("SELECT title, substr(text, 1, ?) FROM pages ORDER BY id", (FORWARD_CHARS,)):
            page = np.array([vocab.setdefault(t, len(vocab)) for t in page_terms(title, text or "")], dtype=np.int32)
            ids.append(page)
            positions += len(page)
            total += len(page)
            offsets.append(total)
            titles.append(title)
            if positions >= max_positions:
                _write_chunk(tmp, chunks, vocab, ids)
                chunks, positions, vocab, ids = chunks + 1, 0, {"": 0}, []
    finally:
        conn.close()
    if ids or chunks == 0:
        _write_chunk(tmp, chunks, vocab, ids)
        chunks += 1
    del vocab, ids
    titles.close()
    offsets.close()
    terms = _merge_vocabularies(tmp, chunks, out_dir)
    out = ArrayWriter(out_dir / "ids.i32")
    for k in range(chunks):
        mapping = np.load(tmp / f"{k}.map", mmap_mode="r")
        local = np.fromfile(tmp / f"{k}.ids", dtype="<i4")
        out.extend(mapping[local])
        (tmp / f"{k}.ids").unlink()
    out.close()
    shutil.rmtree(tmp)
    return {"pages": offsets.count - 1, "terms": terms, "positions": total, "chunks": chunks}


TERM_ID_CACHE = 50_000
"""Terms whose ids a forward index keeps (about 100 bytes each); the cache is emptied when full."""
MAX_CACHED_TERM = 64
"""Longer terms are not kept in the term-id cache."""


class ForwardIndex:
    """A built forward index, memory-mapped (see the module docstring)."""

    def __init__(self, directory: str | Path):
        directory = Path(directory)
        self._ids = open_array(directory / "ids.i32")
        self._offsets = open_array(directory / "offsets.i64")
        self.vocab = StringTable(directory, "vocab")
        self._term_ids: dict[str, int] = {}
        """Term -> id (-1: no page has it) for the terms most recently asked (a binary search each, else)."""
        if len(self._offsets) == 0 or int(self._offsets[-1]) != len(self._ids):
            raise ValueError(f"the forward index at {directory} is inconsistent; rebuild the simulator")

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def vocabulary_size(self) -> int:
        return len(self.vocab)

    def ids(self, terms: list[str]) -> list[int]:
        """Term ids of ``terms`` (terms no page has are left out)."""
        cache = self._term_ids
        out = []
        for t in terms:
            i = cache.get(t)
            if i is None:
                if len(cache) >= TERM_ID_CACHE:
                    cache.clear()
                if len(t) > MAX_CACHED_TERM:  # a hostile 10 MB word is looked up, never kept
                    i = self.vocab.find(t)
                else:
                    i = cache[t] = self.vocab.find(t)
            if i >= 0:
                out.append(i)
        return out

    def sequence(self, docnum: int, title: str = "", text: str = "") -> np.ndarray:
        return self._ids[self._offsets[docnum]:self._offsets[docnum + 1]]


def open_titles(directory: str | Path) -> StringTable | None:
    """The page titles table of a simulator's ``terms/`` directory, ``None`` if it has none."""
    try:
        return StringTable(directory, "titles")
    except (OSError, ValueError):
        return None


class LazyForwardIndex:
    """The forward index computed page by page from the text, for simulators built before
    it existed; pages are kept in an LRU of ``maxsize``."""

    def __init__(self, maxsize: int = 50_000):
        self.maxsize = maxsize
        self._vocab: dict[str, int] = {"": 0}
        self._pages: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vocabulary_size(self) -> int:
        return len(self._vocab)

    def _assign(self, terms: list[str]) -> list[int]:
        missing = [t for t in terms if t not in self._vocab]
        if missing:
            with self._lock:
                for t in missing:
                    self._vocab.setdefault(t, len(self._vocab))
        return [self._vocab[t] for t in terms]

    def ids(self, terms: list[str]) -> list[int]:
        return [self._vocab[t] for t in terms if t in self._vocab]

    def sequence(self, docnum: int, title: str = "", text: str = "") -> np.ndarray:
        seq = self._pages.get(docnum)
        if seq is None:
            seq = np.array(self._assign(page_terms(title, text)), dtype=np.int32)
            with self._lock:
                self._pages[docnum] = seq
                while len(self._pages) > self.maxsize:
                    self._pages.popitem(last=False)
        return seq
