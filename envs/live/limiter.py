"""Request-rate limits per source that hold across threads and processes on one machine.

Each source has a small state file holding its *theoretical arrival time* (GCRA, the
generic cell rate algorithm, i.e. a token bucket kept as one number). A caller takes the
file's ``flock``, reads the time, reserves the next slot ``1/qps`` after it, writes it back
and releases the lock, then sleeps until its slot outside the lock. Every process whose
limiter points at the same folder therefore shares one budget per source: many rollout
workers behind one API key never exceed its rate together.

``flock`` does not exclude two threads using the same open file, so threads of one
process also take a ``threading.Lock``; a forked child reopens the files (a shared open
file description would not exclude the parent).
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
from pathlib import Path

from envs.live.errors import RateLimited

_STATE = struct.Struct("<d")
# A stored slot further ahead than this is a clock jump or a stale file, not a queue.
_STALE_AHEAD_S = 86400.0


class RateLimiter:
    """Slots per source at ``rates[source]`` requests per second, shared through ``directory``."""

    def __init__(self, directory: str | os.PathLike, rates: dict[str, float], burst: int = 1):
        if burst < 1:
            raise ValueError(f"RateLimiter: expected burst >= 1, got {burst}")
        for source, rate in rates.items():
            if not rate > 0:
                raise ValueError(f"RateLimiter: expected a rate > 0 for {source!r}, got {rate}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rates = dict(rates)
        self.burst = burst
        self._lock = threading.Lock()
        self._fds: dict[str, int] = {}
        self._pid = os.getpid()

    def _fd(self, source: str) -> int:
        if self._pid != os.getpid():  # forked: the inherited descriptors share the parent's locks
            self._fds, self._pid = {}, os.getpid()
        fd = self._fds.get(source)
        if fd is None:
            fd = os.open(self.directory / f"{source}.rate", os.O_RDWR | os.O_CREAT, 0o644)
            self._fds[source] = fd
        return fd

    def reserve(self, source: str, deadline: float | None = None) -> float:
        """Take the next slot for ``source``; return the seconds to wait before sending.

        Raises :class:`RateLimited` (reserving nothing) when the slot lies past ``deadline``
        (a ``time.time()`` value). A source without a configured rate is not limited.
        """
        rate = self.rates.get(source)
        if rate is None:
            return 0.0
        interval = 1.0 / rate
        tolerance = (self.burst - 1) * interval
        with self._lock:
            fd = self._fd(source)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = time.time()
                raw = os.pread(fd, _STATE.size, 0)
                stored = _STATE.unpack(raw)[0] if len(raw) == _STATE.size else 0.0
                if stored - now > _STALE_AHEAD_S:
                    stored = 0.0
                tat = max(stored, now)
                send_at = max(now, tat - tolerance)
                if deadline is not None and send_at > deadline:
                    error = RateLimited(source, f"local rate limit ({rate:g}/s): the next slot is "
                                        f"{send_at - now:.2f}s away, past this call's deadline")
                    error.retryable = False  # waiting longer cannot bring the slot before the deadline
                    raise error
                os.pwrite(fd, _STATE.pack(tat + interval), 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return send_at - now

    def acquire(self, source: str, deadline: float | None = None) -> float:
        """Reserve a slot and sleep until it; return the seconds waited."""
        wait = self.reserve(source, deadline)
        if wait > 0:
            time.sleep(wait)
        return wait

    def penalize(self, source: str, seconds: float) -> None:
        """Hold every caller of ``source`` back for ``seconds`` from now (a provider's
        Retry-After applies to the key, so to all workers)."""
        if source not in self.rates or seconds <= 0:
            return
        with self._lock:
            fd = self._fd(source)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                raw = os.pread(fd, _STATE.size, 0)
                stored = _STATE.unpack(raw)[0] if len(raw) == _STATE.size else 0.0
                os.pwrite(fd, _STATE.pack(max(stored, time.time() + seconds)), 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the state files (the limiter reopens them if used again)."""
        with self._lock:
            if self._pid == os.getpid():
                for fd in self._fds.values():
                    os.close(fd)
            self._fds = {}

    def __getstate__(self):  # picklable for process pools: descriptors are reopened
        return {"directory": self.directory, "rates": self.rates, "burst": self.burst}

    def __setstate__(self, state):
        self.__init__(state["directory"], state["rates"], state["burst"])
