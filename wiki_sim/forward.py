"""The forward index: each page as an array of term ids, for proximity at search time.

Built with the simulator (``terms/`` beside the store, for either engine): page ``i`` in the
store's page order (the engines' document order) is ``ids[offsets[i]:offsets[i + 1]]``:
its title's terms, a 0 (the separator), then the terms of the first
:data:`FORWARD_CHARS` characters of its text (stopwords dropped, Porter stems, the
analyzer of the index). ``vocab.json`` lists the terms by id. The arrays are
memory-mapped, so opening costs nothing and pages are read on demand.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from wiki_sim.analysis import analyze

FORWARD_DIR = "terms"
# Characters of a page whose terms are kept (long articles: their beginning).
FORWARD_CHARS = 20_000


def page_terms(title: str, text: str) -> list[str]:
    """A page's terms as the forward index keeps them ("" separates title and text)."""
    return analyze(title) + [""] + analyze(text[:FORWARD_CHARS])


def build_forward_index(store_path: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Write the forward index of every page of a finalized store into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=False)
    vocab: dict[str, int] = {"": 0}
    chunks: list[np.ndarray] = []
    offsets = [0]
    conn = sqlite3.connect(f"file:{Path(store_path)}?mode=ro", uri=True)
    try:
        for title, text in conn.execute("SELECT title, substr(text, 1, ?) FROM pages ORDER BY id", (FORWARD_CHARS,)):
            ids = [vocab.setdefault(t, len(vocab)) for t in page_terms(title, text or "")]
            chunks.append(np.array(ids, dtype=np.int32))
            offsets.append(offsets[-1] + len(ids))
    finally:
        conn.close()
    np.save(out_dir / "ids.npy", np.concatenate(chunks) if chunks else np.zeros(0, np.int32))
    np.save(out_dir / "offsets.npy", np.array(offsets, dtype=np.int64))
    terms = [""] * len(vocab)
    for term, i in vocab.items():
        terms[i] = term
    (out_dir / "vocab.json").write_text(json.dumps(terms, ensure_ascii=False), encoding="utf-8")
    return {"pages": len(offsets) - 1, "terms": len(vocab), "positions": offsets[-1]}


class ForwardIndex:
    """A built forward index, memory-mapped."""

    def __init__(self, directory: str | Path):
        directory = Path(directory)
        # A plain ndarray view of the memory map: slicing a np.memmap costs a Python-level
        # __array_finalize__ per slice.
        self._ids = np.load(directory / "ids.npy", mmap_mode="r").view(np.ndarray)
        self._offsets = np.load(directory / "offsets.npy")
        terms = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        self._vocab = {t: i for i, t in enumerate(terms)}

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def vocabulary_size(self) -> int:
        return len(self._vocab)

    def ids(self, terms: list[str]) -> list[int]:
        """Term ids of ``terms`` (terms no page has are left out)."""
        return [self._vocab[t] for t in terms if t in self._vocab]

    def sequence(self, docnum: int, title: str = "", text: str = "") -> np.ndarray:
        return self._ids[self._offsets[docnum]:self._offsets[docnum + 1]]


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
