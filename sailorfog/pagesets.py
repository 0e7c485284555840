"""Sets of page ids as sorted arrays, and a cache bounded in bytes.

The uniqueness check intersects candidate sets of the whole corpus. As Python sets they cost
about 60 bytes and a hash per page, so a check's cost and a cache's memory grew with the
corpus; as sorted unique ``numpy`` arrays (4-8 bytes a page, often a view of the
memory-mapped postings) an intersection of a small set with a large one is a binary search
per element of the small one (:func:`intersect`), whatever the corpus size.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any, Iterable

import numpy as np

EMPTY = np.zeros(0, np.int64)


def as_pages(pages: Iterable[int] | np.ndarray) -> np.ndarray:
    """A sorted array without repeats of ``pages`` (a set, a list or an array)."""
    if isinstance(pages, np.ndarray):  # int64 throughout: searchsorted across dtypes would copy the sorted side
        pages = pages.astype(np.int64, copy=False)
        return pages if is_sorted_unique(pages) else np.unique(pages)
    return np.fromiter(sorted(pages), np.int64)


def distinct(pages: np.ndarray, n: int) -> np.ndarray:
    """The sorted distinct values of ``pages`` (ids below ``n``): a hash pass when few, a pass
    over an ``n``-byte mark array when many (cheaper than hashing a large share of the corpus)."""
    if len(pages) * 16 < n:
        return np.unique(pages).astype(np.int64, copy=False)
    mark = np.zeros(n, bool)
    mark[pages] = True
    return np.flatnonzero(mark)


def dedupe_sorted(pages: np.ndarray) -> np.ndarray:
    """``pages`` (sorted, maybe with repeats) without repeats."""
    return pages[np.r_[True, pages[1:] != pages[:-1]]] if len(pages) > 1 else pages


def is_sorted_unique(a: np.ndarray) -> bool:
    return len(a) < 2 or bool(np.all(a[1:] > a[:-1]))


def isin_sorted(values: np.ndarray, pages: np.ndarray) -> np.ndarray:
    """``values[i] in pages`` for each i (``pages`` sorted, both page ids >= 0): a binary search
    each, or, when that costs more, a look-up in a mark array as long as the largest page id."""
    if not len(pages) or not len(values):
        return np.zeros(len(values), bool)
    top = int(pages[-1])
    if len(values) * max(1, int(len(pages)).bit_length()) > 4 * (len(pages) + len(values)) + top // 4:
        mark = np.zeros(top + 1, bool)
        mark[pages] = True
        inside = values <= top
        out = np.zeros(len(values), bool)
        out[inside] = mark[values[inside]]
        return out
    at = np.searchsorted(pages, values)
    at[at == len(pages)] = 0
    return pages[at] == values


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a & b`` of two sorted arrays without repeats."""
    if len(a) > len(b):
        a, b = b, a
    return a[isin_sorted(a, b)] if len(a) else a


def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a - b`` of two sorted arrays without repeats."""
    return a[~isin_sorted(a, b)] if len(a) and len(b) else a


def contains(pages: np.ndarray, page: int | None) -> bool:
    if page is None or not len(pages):
        return False
    at = int(np.searchsorted(pages, page))
    return at < len(pages) and int(pages[at]) == page


def size_of(value: Any) -> int:
    """Bytes a cached value holds (arrays: their buffer; sets: the table and the int objects)."""
    if isinstance(value, np.ndarray):
        return value.nbytes + 112
    if isinstance(value, (set, frozenset)):
        return sys.getsizeof(value) + 32 * len(value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(size_of(v) + sys.getsizeof(k) for k, v in value.items())
    return sys.getsizeof(value)


class ByteLRU:
    """A least-recently-used cache whose values (with their keys) hold at most ``max_bytes``.

    A value larger than the bound on its own is not kept. Reads and writes follow a dict's
    ``get``, ``in``, ``[]`` and ``len``."""

    def __init__(self, max_bytes: int):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._items.get(key)
        if found is None:
            return default
        self._items.move_to_end(key)
        return found[0]

    def __getitem__(self, key: Any) -> Any:
        found = self._items.get(key)
        if found is None:
            raise KeyError(key)
        self._items.move_to_end(key)
        return found[0]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.pop(key)
        size = size_of(value) + sys.getsizeof(key)
        if size > self.max_bytes:
            return
        self._items[key] = (value, size)
        self.nbytes += size
        while self.nbytes > self.max_bytes:
            _, (_, dropped) = self._items.popitem(last=False)
            self.nbytes -= dropped

    def pop(self, key: Any, default: Any = None) -> Any:
        found = self._items.pop(key, None)
        if found is None:
            return default
        self.nbytes -= found[1]
        return found[0]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
        self.nbytes = 0
