"""Retries with tenacity: exponential backoff with jitter, Retry-After honoured, and a
deadline that bounds the whole thing.

Only errors marked retryable (transient failures, rate limits, unparsable replies) are
retried; a bad key or a spent quota, a missing page, or a local rate-limit slot past the
deadline go straight back to the caller, which falls back to the next source. A retry is
not started when its wait would end past the deadline, or when the provider asks for a
longer pause than ``retry_after_max``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception

from envs.live.errors import LiveError, RateLimited

T = TypeVar("T")


def backoff_seconds(attempt: int, initial: float, maximum: float, jitter: float, rng: random.Random) -> float:
    """Wait after failed attempt number ``attempt`` (1-based): ``initial * 2**(attempt-1)``
    capped at ``maximum``, plus uniform jitter in ``[0, jitter]``."""
    return min(maximum, initial * 2 ** (attempt - 1)) + rng.uniform(0.0, jitter)


@dataclass
class RetryPolicy:
    """How one source is retried within a deadline."""

    max_attempts: int = 4
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    backoff_jitter: float = 0.5
    retry_after_max: float = 30.0

    def __post_init__(self) -> None:
        self._rng = random.Random()

    def run(self, fn: Callable[[], T], *, deadline: float,
            on_rate_limit: Callable[[RateLimited], None] | None = None) -> tuple[T, int]:
        """Call ``fn`` until it succeeds or may not be retried; return (result, retries).

        The last error is re-raised, with the number of retries made attached as
        ``error.retries``.
        """
        planned: dict[str, float] = {}

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number >= self.max_attempts:
                return True
            error = state.outcome.exception()
            wait = backoff_seconds(state.attempt_number, self.backoff_initial, self.backoff_max,
                                   self.backoff_jitter, self._rng)
            if isinstance(error, RateLimited) and error.retry_after is not None:
                if error.retry_after > self.retry_after_max:
                    return True
                wait = max(error.retry_after, min(wait, error.retry_after + self.backoff_jitter))
            planned["wait"] = wait
            return time.time() + wait >= deadline

        def before_sleep(state: RetryCallState) -> None:
            error = state.outcome.exception()
            if on_rate_limit is not None and isinstance(error, RateLimited):
                on_rate_limit(error)

        retrying = Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, LiveError) and e.retryable),
            stop=stop, wait=lambda state: planned.get("wait", 0.0), before_sleep=before_sleep,
            reraise=True, sleep=time.sleep)
        attempts = 0

        def counted() -> T:
            nonlocal attempts
            attempts += 1
            return fn()

        try:
            result = retrying(counted)
        except LiveError as error:
            error.retries = attempts - 1
            raise
        return result, attempts - 1
