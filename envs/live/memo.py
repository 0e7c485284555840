"""A small in-process memo of answered queries and pages, in front of the SQLite cache.

requests-cache answers a repeated request in about a millisecond and a half (building the
request, hashing it, reading and unpickling the row); rollout workers repeat the same
queries and pages constantly, so each process also keeps the parsed answers it has seen,
bounded in count and characters, and expiring as the cache entry would. The SQLite cache
stays the one shared across processes and restarts.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Hashable


class Memo:
    """Thread-safe LRU of (value, source) with a time-to-live per entry."""

    def __init__(self, max_items: int = 4096, max_chars: int = 32_000_000):
        self.max_items, self.max_chars = max_items, max_chars
        self._entries: OrderedDict[Hashable, tuple[Any, str, float, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[Any, str] | None:
        """The value and its source, or None when absent or expired."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            value, source, expires, size = entry
            if expires < time.time():
                del self._entries[key]
                self._chars -= size
                return None
            self._entries.move_to_end(key)
            return value, source

    def put(self, key: Hashable, value: Any, source: str, ttl: float, size: int) -> None:
        """Keep ``value`` for ``ttl`` seconds (-1: until evicted; 0: not kept)."""
        if self.max_items <= 0 or ttl == 0 or size > self.max_chars // 4:
            return
        expires = float("inf") if ttl < 0 else time.time() + ttl
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= old[3]
            self._entries[key] = (value, source, expires, size)
            self._chars += size
            while len(self._entries) > self.max_items or self._chars > self.max_chars:
                _, (_, _, _, evicted) = self._entries.popitem(last=False)
                self._chars -= evicted

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0
