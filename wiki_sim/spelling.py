"""Spelling suggestions through a deletion index over the vocabulary (SymSpell's idea).

Two words within edit distance ``d`` (optimal string alignment: a transposition counts 1)
reduce to a common string by at most ``d`` deletions from each. So the index stores, for
every indexed term, the strings its first :data:`PREFIX` letters give with 0, 1 or 2
deletions (the first letter is never deleted: a suggestion starts with the word's first
letter, as the scan it replaces required), each as a 64-bit key; a misspelt word looks up
the keys of its own deletions (at most 22), and only the terms found are checked with the
real edit distance. Deleting within a prefix keeps every match: the deletions an alignment
needs on the prefix's side never exceed the alignment's cost. Cost per word: linear in its
length (22 keys, binary searches in a sorted array) plus the candidates checked
(:data:`MAX_CANDIDATES` at most), not in the vocabulary.

Files (``<simulator>/spelling/``, written at build time or on first use, read memory-mapped
so processes share them): ``terms.bin`` (UTF-8 terms, newline-separated), ``offsets.npy``,
``df.npy`` (document frequency per term), ``keys.u64`` (sorted deletion keys) and
``rows.u32`` (the term of each key); built in bounded memory (keys sorted in buckets).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

SPELLING_DIR = "spelling"
SPELLING_FILES = frozenset({"terms.bin", "offsets.npy", "df.npy", "lens.u8", "keys.u64", "rows.u32", "meta.json"})
"""What :func:`build_spelling_index` writes into its folder."""
PREFIX = 7
"""Letters of a term (the first one included) whose deletions are indexed."""
MAX_DISTANCE = 2
"""Largest edit distance a suggestion may be from the word (1 below 5 letters)."""
MAX_WORD_LETTERS = 40
"""Longest word looked up (kept equal to wiki_sim.search.SUGGEST_MAX_LETTERS; a test checks)."""
MAX_TERM_LETTERS = MAX_WORD_LETTERS + MAX_DISTANCE
"""Longest indexed term (a longer one is never within reach of a word looked up)."""
MAX_CANDIDATES = 5000
"""Terms checked with the edit distance per word at most (the commonest first)."""
_FILES = ("terms.bin", "offsets.npy", "df.npy", "lens.u8", "keys.u64", "rows.u32")
_CHUNK = 200_000
# One random odd multiplier per position (a fixed seed: keys must match across processes).
_MULT = (np.random.default_rng(20260522).integers(1, 2 ** 63, size=PREFIX, dtype=np.uint64) * 2 + 1).astype(np.uint64)
_PATTERNS = [()] + [(i,) for i in range(1, PREFIX)] + list(itertools.combinations(range(1, PREFIX), 2))


def letters_apart(a: str, b: str) -> int:
    """How many letters differ between two words as multisets (``ghandi``/``gandhi``: 0)."""
    ca, cb = Counter(a), Counter(b)
    return sum(((ca - cb) + (cb - ca)).values())


def edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance (a transposition counts 1: ``Einstien``, ``Ghandi``)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def max_distance(word: str) -> int:
    """The edit distance a suggestion for ``word`` may be at: 2 from 5 letters, else 1."""
    return MAX_DISTANCE if len(word) >= 5 else 1


def _codes(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(codepoints of each word's first PREFIX letters, 0-padded: (n, PREFIX) uint64; lengths)."""
    codes = np.zeros((len(words), PREFIX), np.uint64)
    for i, w in enumerate(words):
        head = [ord(c) for c in w[:PREFIX]]
        codes[i, :len(head)] = head
    return codes, np.fromiter((len(w) for w in words), np.int64, len(words))


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(31))
    h = h * np.uint64(0x9E3779B97F4A7C15)
    return h ^ (h >> np.uint64(29))


def deletion_keys(words: list[str], deletions: int = MAX_DISTANCE) -> tuple[np.ndarray, np.ndarray]:
    """(keys, row of the word each key came from) for every string a word's prefix gives with
    up to ``deletions`` deletions after its first letter (duplicates possible)."""
    codes, lengths = _codes(words)
    keys, rows = [], []
    index = np.arange(len(words), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for pattern in _PATTERNS:
            if len(pattern) > deletions:
                continue
            kept = [i for i in range(PREFIX) if i not in pattern]
            h = np.zeros(len(words), np.uint64)
            for j, col in enumerate(kept):
                h += codes[:, col] * _MULT[j]
            valid = lengths > (max(pattern) if pattern else 0)
            keys.append(_mix(h[valid]))
            rows.append(index[valid])
    return np.concatenate(keys), np.concatenate(rows)


def build_spelling_index(vocabulary: Iterable[tuple[str, int]], out_dir: str | Path) -> dict[str, int]:
    """Write the deletion index of ``vocabulary`` ((term, document frequency) pairs) to
    ``out_dir`` (created; written beside it and renamed in, so readers never see half).

    The keys are sorted in :data:`_BUCKETS` passes by their top bits through temporary
    files, so memory holds the terms and one bucket of keys, not all of them."""
    out_dir = Path(out_dir)
    pairs = sorted((t, int(df)) for t, df in vocabulary if 1 <= len(t) <= MAX_TERM_LETTERS and "\n" not in t)
    terms = [t for t, _ in pairs]
    df_arr = np.fromiter((df for _, df in pairs), np.uint32, len(pairs))
    del pairs
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        keys = _write_sorted_keys(terms, tmp)
        encoded = [t.encode("utf-8") for t in terms]
        offsets = np.zeros(len(terms) + 1, np.int64)
        offsets[1:] = np.cumsum(np.fromiter((len(b) + 1 for b in encoded), np.int64, len(encoded)))
        with open(tmp / "terms.bin", "wb") as f:
            for b in encoded:
                f.write(b + b"\n")
        np.save(tmp / "offsets.npy", offsets)
        np.save(tmp / "df.npy", df_arr)
        np.fromiter((len(t) for t in terms), np.uint8, len(terms)).tofile(tmp / "lens.u8")
        # Written last: a rebuild of the simulator accepts no file here newer than it.
        (tmp / "meta.json").write_text(json.dumps({"terms": len(terms), "keys": keys}) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o755)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"terms": len(terms), "keys": keys}


_BUCKETS = 32


def _write_sorted_keys(terms: list[str], tmp: Path) -> int:
    """keys.u64 / rows.u32 in ``tmp``: every (deletion key, term row), sorted, without repeats."""
    shift = np.uint64(64 - 5)
    parts = [(open(tmp / f"b{i}.k", "wb"), open(tmp / f"b{i}.r", "wb")) for i in range(_BUCKETS)]
    try:
        for start in range(0, len(terms), _CHUNK):
            k, r = deletion_keys(terms[start:start + _CHUNK])
            r += np.uint32(start)
            bucket = (k >> shift).astype(np.int64)
            order = np.argsort(bucket, kind="stable")
            bounds = np.searchsorted(bucket[order], np.arange(_BUCKETS + 1))
            for i in range(_BUCKETS):
                sel = order[bounds[i]:bounds[i + 1]]
                k[sel].tofile(parts[i][0])
                r[sel].tofile(parts[i][1])
    finally:
        for fk, fr in parts:
            fk.close()
            fr.close()
    total = 0
    with open(tmp / "keys.u64", "wb") as out_k, open(tmp / "rows.u32", "wb") as out_r:
        for i in range(_BUCKETS):
            k = np.fromfile(tmp / f"b{i}.k", np.uint64)
            r = np.fromfile(tmp / f"b{i}.r", np.uint32)
            order = np.lexsort((r, k))
            k, r = k[order], r[order]
            if len(k):
                keep = np.ones(len(k), bool)
                keep[1:] = (k[1:] != k[:-1]) | (r[1:] != r[:-1])
                k, r = k[keep], r[keep]
            k.tofile(out_k)
            r.tofile(out_r)
            total += len(k)
            os.unlink(tmp / f"b{i}.k")
            os.unlink(tmp / f"b{i}.r")
    return total


def bounded_distance(a: str, b: str, k: int) -> int:
    """``edit_distance(a, b)`` (optimal string alignment) when it is at most ``k``, else
    ``k + 1``; only the diagonal band of width ``2k + 1`` is computed (time linear in the words)."""
    m, n = len(a), len(b)
    if abs(m - n) > k:
        return k + 1
    far = k + 1
    prev2: list[int] = []
    prev = [j if j <= k else far for j in range(n + 1)]
    for i in range(1, m + 1):
        cur = [far] * (n + 1)
        if i <= k:
            cur[0] = i
        lo, hi = max(1, i - k), min(n, i + k)
        for j in range(lo, hi + 1):
            cost = a[i - 1] != b[j - 1]
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = min(v, far)
        if min(cur[lo - 1:hi + 1]) > k:
            return far
        prev2, prev = prev, cur
    return prev[n]


class SpellingIndex:
    """A built deletion index, memory-mapped; :meth:`suggest` as the engines' ``suggest``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        missing = [f for f in _FILES if not (self.path / f).is_file()]
        if missing:
            raise FileNotFoundError(f"no spelling index at {self.path} (missing {', '.join(missing)})")
        self._blob = _memmap(self.path / "terms.bin", np.uint8)
        self._offsets = np.load(self.path / "offsets.npy", mmap_mode="r").view(np.ndarray)  # memmap is slow to index
        self._df = np.load(self.path / "df.npy", mmap_mode="r").view(np.ndarray)
        self._lens = _memmap(self.path / "lens.u8", np.uint8)
        self._keys = _memmap(self.path / "keys.u64", np.uint64)
        self._rows = _memmap(self.path / "rows.u32", np.uint32)
        if not (len(self._offsets) == len(self._df) + 1 == len(self._lens) + 1 and len(self._keys) == len(self._rows)):
            raise ValueError(f"the spelling index at {self.path} is inconsistent; rebuild the simulator")

    def __len__(self) -> int:
        return len(self._df)

    def term(self, row: int) -> str:
        a, b = int(self._offsets[row]), int(self._offsets[row + 1]) - 1
        return bytes(self._blob[a:b]).decode("utf-8")

    def candidates(self, word: str) -> list[int]:
        """Rows of the terms that share a deletion key with ``word`` (its first letter kept)."""
        keys = np.unique(deletion_keys([word], max_distance(word))[0])
        lo = np.searchsorted(self._keys, keys, side="left")
        hi = np.searchsorted(self._keys, keys, side="right")
        rows = [self._rows[a:b] for a, b in zip(lo.tolist(), hi.tolist()) if b > a]
        return np.unique(np.concatenate(rows)).tolist() if rows else []

    def suggest(self, word: str) -> str | None:
        """The indexed term closest in spelling to ``word`` (edit distance 1, or 2 from 5
        letters; same first letter; ties: the same letters, then the commoner term, then the
        first in order), ``None`` if none is close or the word is over :data:`MAX_WORD_LETTERS`."""
        if not word or len(word) > MAX_WORD_LETTERS:
            return None
        maxdist = max_distance(word)
        rows = np.asarray(self.candidates(word), np.int64)
        rows = rows[np.abs(self._lens[rows].astype(np.int64) - len(word)) <= maxdist]
        if len(rows) > MAX_CANDIDATES:  # the commonest terms first
            rows = rows[np.argsort(-self._df[rows].astype(np.int64), kind="stable")[:MAX_CANDIDATES]]
        best: tuple[int, int, int, str] | None = None
        for row in rows.tolist():
            cand = self.term(row)
            if cand == word:
                continue
            dist = bounded_distance(word, cand, maxdist)
            if dist <= maxdist:
                key = (dist, letters_apart(word, cand), -int(self._df[row]), cand)
                if best is None or key < best:
                    best = key
        return best[-1] if best else None


def _memmap(path: Path, dtype: type) -> np.ndarray:
    size = path.stat().st_size
    if size % np.dtype(dtype).itemsize:
        raise ValueError(f"the spelling index file {path} is truncated; rebuild the simulator")
    return np.memmap(path, dtype, mode="r").view(np.ndarray) if size else np.zeros(0, dtype)


def open_spelling_index(sim_dir: str | Path, vocabulary: Callable[[], Iterable[tuple[str, int]]]) -> SpellingIndex:
    """The simulator's spelling index: ``<sim_dir>/spelling`` as built, else built once now
    from ``vocabulary()`` into it (or, where the simulator is read-only, into the user's
    cache, keyed by the simulator's path and build record) and kept there for later opens."""
    sim_dir = Path(sim_dir).absolute()
    places = [sim_dir / SPELLING_DIR, _cache_place(sim_dir)]
    for place in places:
        try:
            return SpellingIndex(place)
        except (FileNotFoundError, ValueError):
            continue
    words = list(vocabulary())
    for place in places:
        try:
            build_spelling_index(words, place)
        except OSError:
            if not place.is_dir():  # not writable; another process's complete copy is kept
                continue
        try:
            return SpellingIndex(place)
        except (FileNotFoundError, ValueError):
            continue
    raise OSError(f"no place to write the spelling index of {sim_dir} (tried {', '.join(map(str, places))})")


def _cache_place(sim_dir: Path) -> Path:
    from wiki_sim.common.cache import derived_cache_dir

    return derived_cache_dir(sim_dir, "spelling")
