"""Compact per-title tables for the link pass: a corpus's titles and names in flat arrays, not Python objects.

Deriving links needs, for every title of the corpus, its name keys (title, lower-case first
letter, plurals, short forms) and a few flags. Held as Python strings, tuples, dicts and
dataclasses that costs about 2 KB a title (200 MB at 100k pages, 2 GB at 1M); here it is
about 100 bytes a title:

- :class:`TitleList`: the titles as one UTF-8 blob and an ``array`` of end offsets;
- :class:`HashTable`: sorted 64-bit hashes with a value each, looked up all at once for a
  whole page's candidates by the hashes' top bits (:class:`SortedHashes`);
- :class:`SeenTitles`: which titles a stream has already produced, with a 32-bit value
  (a checksum of the text), as sorted hash arrays plus a small dict of recent ones.

Keys are Python's ``hash`` of the string or token tuple: stable within the building process,
which is the only place these tables live. Two different names with the same 64-bit hash
would be taken for one (about one chance in 10^5 at 18M titles, never on a corpus of tests).
"""

from __future__ import annotations

from array import array
from typing import Iterable, Iterator

import numpy as np

_EMPTY = np.empty(0, dtype=np.int64)


class TitleList:
    """Titles in order, held as one UTF-8 blob and end offsets (the title's length + 8 bytes each)."""

    def __init__(self, titles: Iterable[str] = ()):
        self._blob = bytearray()
        self._ends = array("q")
        for t in titles:
            self.append(t)

    def append(self, title: str) -> None:
        self._blob += title.encode("utf-8", "surrogatepass")
        self._ends.append(len(self._blob))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> str:
        start = self._ends[i - 1] if i > 0 else 0
        return self._blob[start:self._ends[i]].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        start = 0
        blob = self._blob
        for end in self._ends:
            yield blob[start:end].decode("utf-8", "surrogatepass")
            start = end

    @property
    def nbytes(self) -> int:
        return len(self._blob) + self._ends.itemsize * len(self._ends)


def hashes(items: Iterable[object], count: int = -1) -> np.ndarray:
    """``hash`` of each item as an int64 array."""
    return np.fromiter(map(hash, items), dtype=np.int64, count=count)


_SIGN = np.uint64(1 << 63)


def expand_ranges(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The indices ``lo[0] .. lo[0]+n[0]-1, lo[1] .. lo[1]+n[1]-1, ...`` as one array."""
    return np.repeat(lo, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)


class SortedHashes:
    """Where each of many 64-bit hashes sits in a sorted array of distinct ones, -1 where absent.

    Hashes are uniform, so the top bits of a hash place it: the array is cut into about as many
    buckets as it has keys, and a lookup reads the bucket's two offsets and its key or two
    instead of binary searching (about 22 cache misses each in a table of millions, the link
    pass's main cost at 1M pages). Keys that do not spread (a bucket over :data:`MAX_BUCKET`)
    and small tables keep the binary search."""

    MAX_BUCKET = 64
    MIN_KEYS = 4096
    _SLICE = 1 << 16

    def __init__(self, keys: np.ndarray):
        self.keys = keys
        self._offsets: np.ndarray | None = None
        bits = int(len(keys)).bit_length()
        self._shift = np.uint64(64 - bits)
        if len(keys) >= self.MIN_KEYS:
            # Bucket b holds the keys whose order-preserving unsigned form starts with b's bits;
            # its offsets are found a slice at a time (no temporary as large as the table).
            offsets = np.empty(2 ** bits + 1, dtype=np.int32 if len(keys) < 2 ** 31 else np.int64)
            for lo in range(0, 2 ** bits, self._SLICE):
                b = np.arange(lo, min(lo + self._SLICE, 2 ** bits), dtype=np.uint64)
                offsets[lo:lo + len(b)] = np.searchsorted(keys, ((b << self._shift) ^ _SIGN).view(np.int64))
            offsets[-1] = len(keys)
            if int(np.diff(offsets).max()) <= self.MAX_BUCKET:
                self._offsets = offsets

    @property
    def nbytes(self) -> int:
        return self._offsets.nbytes if self._offsets is not None else 0

    def positions(self, query: np.ndarray) -> np.ndarray:
        """Index into :attr:`keys` of each hash in ``query`` (int64), -1 where absent."""
        if not len(self.keys) or not len(query):
            return np.full(len(query), -1, dtype=np.int64)
        if self._offsets is None:
            pos = np.searchsorted(self.keys, query)
            pos[pos == len(self.keys)] = 0
            return np.where(self.keys[pos] == query, pos, -1)
        bucket = ((query.view(np.uint64) ^ _SIGN) >> self._shift).astype(np.int64)
        lo = self._offsets[bucket].astype(np.int64)
        n = self._offsets[bucket + 1] - lo
        at = expand_ranges(lo, n)
        hit = self.keys[at] == np.repeat(query, n)
        out = np.full(len(query), -1, dtype=np.int64)
        out[np.repeat(np.arange(len(query)), n)[hit]] = at[hit]
        return out


class HashTable:
    """An immutable map from 64-bit hashes to int64 values, over sorted keys (:class:`SortedHashes`).

    Built from parallel arrays; a hash given more than once keeps its first value."""

    def __init__(self, keys: np.ndarray, values: np.ndarray):
        keys = np.asarray(keys, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        self.keys = keys[first]
        self.values = np.asarray(values)[order][first]
        self._index = SortedHashes(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes + self._index.nbytes

    def positions(self, query: np.ndarray) -> np.ndarray:
        """Index into :attr:`keys` / :attr:`values` of each hash in ``query``, -1 where absent."""
        return self._index.positions(np.asarray(query, dtype=np.int64))

    def get(self, key: int, default: int = -1) -> int:
        if not len(self.keys):
            return default
        pos = int(np.searchsorted(self.keys, key))
        if pos < len(self.keys) and self.keys[pos] == key:
            return int(self.values[pos])
        return default

    def __contains__(self, key: int) -> bool:
        pos = int(np.searchsorted(self.keys, key)) if len(self.keys) else 0
        return pos < len(self.keys) and self.keys[pos] == key


class SeenTitles:
    """Titles a stream has produced, each with a 32-bit value, in about 12 bytes a title.

    Recent titles sit in a dict; when it holds more than an eighth of the rest (and at least
    ``recent`` entries) it is merged into the sorted arrays, so merging costs O(n log n) in all."""

    def __init__(self, recent: int = 65536):
        self._recent: dict[int, int] = {}
        self._min_recent = recent
        self._keys = _EMPTY
        self._values = np.empty(0, dtype=np.uint32)

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def get(self, title: str) -> int | None:
        h = hash(title)
        value = self._recent.get(h)
        if value is not None or not len(self._keys):
            return value
        pos = int(np.searchsorted(self._keys, h))
        if pos < len(self._keys) and self._keys[pos] == h:
            return int(self._values[pos])
        return None

    def __contains__(self, title: str) -> bool:
        return self.get(title) is not None

    def add(self, title: str, value: int) -> None:
        self._recent[hash(title)] = value & 0xFFFFFFFF
        if len(self._recent) >= max(self._min_recent, len(self._keys) // 8):
            self._merge()

    def _merge(self) -> None:
        keys = np.fromiter(self._recent.keys(), dtype=np.int64, count=len(self._recent))
        values = np.fromiter(self._recent.values(), dtype=np.uint32, count=len(self._recent))
        keys, values = np.concatenate([self._keys, keys]), np.concatenate([self._values, values])
        order = np.argsort(keys, kind="stable")
        self._keys, self._values = keys[order], values[order]
        self._recent = {}

