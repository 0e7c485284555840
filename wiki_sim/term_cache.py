"""The search engines' per-term cache: least recently used entries dropped past a byte budget.

Both engines cache what a term costs to look up (the Whoosh engine: its score arrays; the
tantivy engine: its document frequency), per process. The bound is in bytes, counted by the
caller for each entry, so that a process's cache never holds more than ``max_bytes`` whatever
mix of terms it is asked (a count of terms would let a few common terms, each a
corpus-sized array, hold gigabytes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Iterator


class TermCache:
    """A thread-safe LRU map holding at most ``max_bytes`` (the sum of its entries' sizes).

    ``on_evict(key)`` is called (under the cache's lock) for each entry dropped to make room.
    An entry larger than the whole budget is not kept (:meth:`put` returns ``False``)."""

    def __init__(self, max_bytes: int, on_evict: Callable[[Hashable], None] | None = None):
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ValueError(f"max_cache_bytes must be an integer >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._on_evict = on_evict
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        """The cached value (now the most recently used), ``None`` if absent."""
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return None
            self._data.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> bool:
        """Cache ``value`` as ``nbytes`` bytes, dropping the least recently used entries past
        the budget; ``False`` (nothing kept) when ``nbytes`` alone exceeds it."""
        if nbytes > self.max_bytes:
            return False
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._data[key] = (value, nbytes)
            self.bytes += nbytes
            while self.bytes > self.max_bytes:
                dropped, (_, size) = self._data.popitem(last=False)
                self.bytes -= size
                if self._on_evict is not None:
                    self._on_evict(dropped)
        return True

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def values(self) -> Iterator[Any]:
        """The cached values, least recently used first (a snapshot)."""
        with self._lock:
            return iter([value for value, _ in self._data.values()])
