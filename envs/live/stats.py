"""Per-call metrics and aggregate statistics of a live-web run."""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from envs.live.errors import LiveError

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    """What the fallback chain made of one query, page or summary."""

    value: T | None
    source: str | None = None
    """The source that answered (None when all failed)."""
    cache_hit: bool = False
    retries: int = 0
    latency_s: float = 0.0
    errors: list[LiveError] = field(default_factory=list)
    """Every source's final error, in the order tried (non-empty on success means fallback)."""
    skipped: list[str] = field(default_factory=list)
    """Sources passed over without a request: no key, or set aside after an auth/quota error."""

    @property
    def ok(self) -> bool:
        return self.value is not None

    def reasons(self) -> str:
        """The errors as one line for an observation (keys already scrubbed)."""
        parts = [str(e) for e in self.errors] + [f"{s}: skipped" for s in self.skipped]
        return "; ".join(parts) or "no source configured"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` in [0, 100] of ``values`` (0.0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class LiveStats:
    """Thread-safe counters over a run: calls per tool, attempts and errors per source."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, Counter] = defaultdict(Counter)
        self._latency: dict[str, list[float]] = defaultdict(list)
        self._sources: dict[str, Counter] = defaultdict(Counter)
        self._items = Counter()

    def attempt(self, source: str, error: LiveError | None, cache_hit: bool = False) -> None:
        """One request to ``source`` (answered from the cache, succeeded, or failed)."""
        with self._lock:
            counter = self._sources[source]
            counter["attempts"] += 1
            if error is None:
                counter["cache_hits" if cache_hit else "network_ok"] += 1
            else:
                counter[f"error:{error.kind}"] += 1

    def item(self, outcome: Outcome) -> None:
        """One query, page or summary finished."""
        with self._lock:
            self._items["items"] += 1
            self._items["ok" if outcome.ok else "failed"] += 1
            self._items["cache_hits"] += int(outcome.ok and outcome.cache_hit)
            self._items["retries"] += outcome.retries
            self._items["fallbacks"] += int(outcome.ok and bool(outcome.errors))

    def call(self, tool: str, ok: bool, degraded: bool, latency_s: float) -> None:
        """One tool call finished."""
        with self._lock:
            counter = self._calls[tool]
            counter["calls"] += 1
            counter["ok" if ok else "failed"] += 1
            counter["degraded"] += int(degraded)
            self._latency[tool].append(latency_s)

    def snapshot(self) -> dict:
        """All counters, with latency percentiles and the cache hit rate of items."""
        with self._lock:
            calls = {tool: {**counter, "latency_p50_s": percentile(self._latency[tool], 50),
                            "latency_p99_s": percentile(self._latency[tool], 99)}
                     for tool, counter in self._calls.items()}
            items = dict(self._items)
            sources = {s: dict(c) for s, c in self._sources.items()}
        items["cache_hit_rate"] = items.get("cache_hits", 0) / items["items"] if items.get("items") else 0.0
        return {"calls": calls, "items": items, "sources": sources}


def peak_rate(timestamps: list[float], window: int = 10) -> float:
    """Highest request rate (per second) over any ``window`` consecutive intervals of
    ``timestamps`` (fewer when there are fewer); 0.0 for fewer than two requests."""
    ts = sorted(timestamps)
    if len(ts) < 2:
        return 0.0
    window = max(1, min(window, len(ts) - 1))
    best = 0.0
    for i in range(len(ts) - window):
        span = ts[i + window] - ts[i]
        best = max(best, window / span if span > 0 else float("inf"))
    return best
