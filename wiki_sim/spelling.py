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
``df.npy`` (document frequency per term), ``keys.npy`` (sorted deletion keys) and
``rows.npy`` (the term of each key).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from wiki_sim.index import edit_distance, letters_apart

SPELLING_DIR = "spelling"
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
_FILES = ("terms.bin", "offsets.npy", "df.npy", "keys.npy", "rows.npy")
_CHUNK = 200_000
# One random odd multiplier per position (a fixed seed: keys must match across processes).
_MULT = (np.random.default_rng(20260522).integers(1, 2 ** 63, size=PREFIX, dtype=np.uint64) * 2 + 1).astype(np.uint64)
_PATTERNS = [()] + [(i,) for i in range(1, PREFIX)] + list(itertools.combinations(range(1, PREFIX), 2))


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
    ``out_dir`` (created; written beside it and renamed in, so readers never see half)."""
    out_dir = Path(out_dir)
    terms, dfs = [], []
    for term, df in vocabulary:
        if 1 <= len(term) <= MAX_TERM_LETTERS and "\n" not in term:
            terms.append(term)
            dfs.append(df)
    order = sorted(range(len(terms)), key=lambda i: terms[i])
    terms = [terms[i] for i in order]
    df_arr = np.asarray([dfs[i] for i in order], np.uint32)
    key_parts, row_parts = [], []
    for start in range(0, len(terms), _CHUNK):
        k, r = deletion_keys(terms[start:start + _CHUNK])
        key_parts.append(k)
        row_parts.append(r + np.uint32(start))
    keys = np.concatenate(key_parts) if key_parts else np.zeros(0, np.uint64)
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, np.uint32)
    order_k = np.lexsort((rows, keys))
    keys, rows = keys[order_k], rows[order_k]
    if len(keys):  # one entry per (key, term)
        keep = np.ones(len(keys), bool)
        keep[1:] = (keys[1:] != keys[:-1]) | (rows[1:] != rows[:-1])
        keys, rows = keys[keep], rows[keep]
    blob = "\n".join(terms).encode("utf-8")
    offsets = np.zeros(len(terms) + 1, np.int64)
    if terms:
        offsets[1:] = np.cumsum([len(t.encode("utf-8")) + 1 for t in terms])
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        (tmp / "terms.bin").write_bytes(blob)
        for name, arr in (("offsets", offsets), ("df", df_arr), ("keys", keys), ("rows", rows)):
            np.save(tmp / f"{name}.npy", arr)
        os.chmod(tmp, 0o755)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"terms": len(terms), "keys": int(len(keys))}


class SpellingIndex:
    """A built deletion index, memory-mapped; :meth:`suggest` as the engines' ``suggest``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        missing = [f for f in _FILES if not (self.path / f).is_file()]
        if missing:
            raise FileNotFoundError(f"no spelling index at {self.path} (missing {', '.join(missing)})")
        self._blob = np.memmap(self.path / "terms.bin", np.uint8, mode="r") \
            if (self.path / "terms.bin").stat().st_size else np.zeros(0, np.uint8)
        self._offsets = np.load(self.path / "offsets.npy", mmap_mode="r")
        self._df = np.load(self.path / "df.npy", mmap_mode="r")
        self._keys = np.load(self.path / "keys.npy", mmap_mode="r")
        self._rows = np.load(self.path / "rows.npy", mmap_mode="r")
        if not (len(self._offsets) == len(self._df) + 1 and len(self._keys) == len(self._rows)):
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
        rows = self.candidates(word)
        at = np.asarray(rows, np.int64)
        lengths = self._offsets[at + 1] - self._offsets[at] - 1  # bytes, at least the letters
        best: tuple[int, int, int, str] | None = None
        checked = [r for r, n in zip(rows, lengths.tolist()) if n >= len(word) - maxdist]
        if len(checked) > MAX_CANDIDATES:
            checked = sorted(checked, key=lambda r: -int(self._df[r]))[:MAX_CANDIDATES]
        for row in checked:
            cand = self.term(row)
            if cand == word or abs(len(cand) - len(word)) > maxdist:
                continue
            dist = edit_distance(word, cand)
            if dist <= maxdist:
                key = (dist, letters_apart(word, cand), -int(self._df[row]), cand)
                if best is None or key < best:
                    best = key
        return best[-1] if best else None


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
    import hashlib

    record = sim_dir / "build.json"
    stamp = record.read_bytes() if record.is_file() else b""
    key = hashlib.sha256(str(sim_dir).encode() + b"\0" + stamp).hexdigest()[:24]
    root = Path(os.environ.get("WEBSAILOR_CACHE") or Path.home() / ".cache" / "websailor-gym")
    return root / "spelling" / key
