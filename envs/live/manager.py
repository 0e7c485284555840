"""The management layer: source chains with retries, fallback, degradation and statistics.

:class:`LiveWeb` owns one transport (cache + limiter), the adapters in their configured
order, and the run statistics. :meth:`LiveWeb.search`, :meth:`LiveWeb.read` and
:meth:`LiveWeb.summarize` never raise for anything the web does: they return an
:class:`~envs.live.stats.Outcome` whose ``value`` is None when every source failed, with
every source's error (keys scrubbed) for the observation and ``info``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

from envs.live.adapters.base import Hit, PageText, Reply
from envs.live.adapters.reader import reader_adapters
from envs.live.adapters.search import scholar_adapters, search_adapters
from envs.live.adapters.summarizer import ModelSummarizer
from envs.live.config import LiveConfig
from envs.live.errors import AuthOrQuota, BadResponse, Blocked, LiveError, RateLimited, Unreachable
from envs.live.limiter import RateLimiter
from envs.live.memo import Memo
from envs.live.netpolicy import check_url
from envs.live.redact import scrub
from envs.live.retry import RetryPolicy
from envs.live.stats import LiveStats, Outcome
from envs.live.transport import Transport
from wiki_sim.focus import ExtractiveSummarizer, Focused

log = logging.getLogger("envs.live")


class LiveWeb:
    """Search, scholar, page reading and summarizing over the configured live sources."""

    def __init__(self, config: LiveConfig | Mapping[str, Any] | str | None = None):
        self.config = LiveConfig.coerce(config)
        cfg = self.config
        self.limiter = RateLimiter(cfg.resolved_limiter_dir(), cfg.qps, cfg.burst)
        self.transport = Transport(cfg, self.limiter)
        self.policy = RetryPolicy(cfg.max_attempts, cfg.backoff_initial, cfg.backoff_max, cfg.backoff_jitter,
                                  cfg.retry_after_max)
        self.search_chain = search_adapters(self.transport, cfg)
        self.scholar_chain = scholar_adapters(self.transport, cfg)
        self.reader_chain = reader_adapters(self.transport, cfg)
        self.model_summarizer = ModelSummarizer(self.transport, cfg)
        self.extractive = ExtractiveSummarizer(budget=cfg.evidence_chars)
        self.stats = LiveStats()
        self.memo = Memo(cfg.memo_items if cfg.cache else 0)
        self._set_aside: dict[str, float] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------ public calls

    def search(self, query: str, *, scholar: bool = False) -> Outcome[list[Hit]]:
        """Top results for ``query`` from the first source of the chain that answers."""
        chain = self.scholar_chain if scholar else self.search_chain
        k = self.config.results_per_query
        key = ("scholar" if scholar else "search", query, k)
        return self._memoized(key, chain, lambda a, deadline: a.search(query, k, deadline), None,
                              lambda hits: sum(len(h.title) + len(h.url) + len(h.snippet) + 16 for h in hits))

    def read(self, url: str, deadline: float | None = None) -> Outcome[PageText]:
        """The page at ``url`` as text, from the first reader that can read it. ``url`` is
        the agent's: it must pass the network policy (:mod:`envs.live.netpolicy`) first; a
        refused or unresolvable URL is answered at once, with no reader tried."""
        key = ("read", url)
        if self.memo.get(key) is None:
            refused = self._check_url(url, deadline)
            if refused is not None:
                return refused
        return self._memoized(key, self.reader_chain, lambda a, d: a.read(url, d), deadline,
                              lambda page: len(page.text) + len(page.title) + 64)

    def _check_url(self, url: str, deadline: float | None) -> Outcome | None:
        start = time.time()
        deadline = deadline if deadline is not None else start + self.config.deadline_s
        try:
            check_url(url.strip(), allow_private=self.config.allow_private_urls,
                      timeout=max(0.01, min(self.config.connect_timeout, deadline - start)))
        except (Blocked, Unreachable) as error:
            outcome = Outcome(value=None, errors=[error], latency_s=time.time() - start)
            self.stats.attempt("policy", error)
            self.stats.item(outcome)
            return outcome
        return None

    def summarize(self, page: PageText, goal: str, deadline: float | None = None) -> tuple[Focused, Outcome | None]:
        """Evidence and summary of ``page`` for ``goal``: by the model when one is configured,
        else (or when it fails: then the outcome carries the errors) by the extractive method."""
        outcome = None
        if self.model_summarizer.available():
            outcome = self._memoized(("summary", page.url, goal, hash(page.text)), [self.model_summarizer],
                                     lambda a, d: a.summarize(url=page.url, title=page.title, text=page.text,
                                                              goal=goal, deadline=d), deadline,
                                     lambda f: len(f.evidence) + len(f.summary) + 64)
            if outcome.ok:
                return outcome.value, outcome
        focused = self.extractive(url=page.url, title=page.title, text=page.text, lead=page.lead, goal=goal)
        return focused, outcome

    def snapshot(self) -> dict:
        """Aggregate statistics of this run so far."""
        return self.stats.snapshot()

    def close(self) -> None:
        self.transport.close()
        self.limiter.close()

    # ------------------------------------------------------------------------ the chain

    def _memoized(self, key: tuple, chain: list, call: Callable[[Any, float], Reply], deadline: float | None,
                  size: Callable[[Any], int]) -> Outcome:
        start = time.time()
        hit = self.memo.get(key)
        if hit is not None:
            value, source = hit
            outcome = Outcome(value=value, source=source, cache_hit=True, latency_s=time.time() - start)
            self.stats.attempt(source, None, cache_hit=True)
            self.stats.item(outcome)
            return outcome
        outcome = self._run(chain, call, deadline)
        if outcome.ok:
            provider = next(a.provider for a in chain if a.name == outcome.source)
            self.memo.put(key, outcome.value, outcome.source, self.config.cache_expiry.get(provider, -1),
                          size(outcome.value))
        return outcome

    def _run(self, chain: list, call: Callable[[Any, float], Reply], deadline: float | None = None) -> Outcome:
        start = time.time()
        deadline = deadline if deadline is not None else start + self.config.deadline_s
        outcome: Outcome = Outcome(value=None)
        usable = []
        for adapter in chain:
            if not adapter.available():
                outcome.skipped.append(f"{adapter.name} (no API key)")
            elif self._is_set_aside(adapter.provider):
                outcome.skipped.append(f"{adapter.name} (set aside after an auth/quota error)")
            else:
                usable.append(adapter)
        for i, adapter in enumerate(usable):
            now = time.time()
            if now >= deadline:
                outcome.skipped.append(f"{adapter.name} (deadline reached)")
                continue
            try:
                reply, retries = self.policy.run(lambda: self._attempt(adapter, call, deadline),
                                                 deadline=self._source_deadline(adapter, now, deadline, len(usable) - i),
                                                 on_rate_limit=lambda e, a=adapter: self._rate_limited(a, e))
            except LiveError as error:
                outcome.retries += getattr(error, "retries", 0)
                outcome.errors.append(error)
                if isinstance(error, AuthOrQuota):
                    self._set_aside_for(adapter.provider)
                continue
            outcome.value, outcome.source, outcome.cache_hit = reply.value, adapter.name, reply.cache_hit
            outcome.retries += retries
            break
        outcome.latency_s = time.time() - start
        self.stats.item(outcome)
        return outcome

    def _source_deadline(self, adapter: Any, now: float, deadline: float, sources_left: int) -> float:
        """When to stop retrying ``adapter``: its share of the time left, so a failing source
        leaves time for the fallbacks after it, but never less than one full request."""
        share = (deadline - now) / sources_left
        one_request = self.config.timeouts.get(adapter.provider, 30.0) + self.config.connect_timeout
        return min(deadline, now + max(share, one_request))

    def _attempt(self, adapter: Any, call: Callable[[Any, float], Reply], deadline: float) -> Reply:
        try:
            reply = call(adapter, deadline)
        except LiveError as error:
            self.stats.attempt(adapter.name, error)
            raise
        except Exception as error:  # a bug or a library surprise must not end the episode
            log.warning("%s: unexpected %s: %s", adapter.name, type(error).__name__, scrub(str(error)))
            wrapped = BadResponse(adapter.name, f"internal error ({type(error).__name__}: {error})")
            wrapped.retryable = False
            self.stats.attempt(adapter.name, wrapped)
            raise wrapped from None
        self.stats.attempt(adapter.name, None, reply.cache_hit)
        return reply

    def _rate_limited(self, adapter: Any, error: RateLimited) -> None:
        # The provider's pause applies to the key, so to every worker sharing it.
        if error.retry_after:
            self.limiter.penalize(adapter.provider, min(error.retry_after, self.config.retry_after_max))

    def _is_set_aside(self, provider: str) -> bool:
        with self._lock:
            until = self._set_aside.get(provider)
            if until is None:
                return False
            if time.time() >= until:
                del self._set_aside[provider]
                return False
            return True

    def _set_aside_for(self, provider: str) -> None:
        with self._lock:
            self._set_aside[provider] = time.time() + self.config.exhausted_cooldown_s
        log.warning("%s: auth or quota failure; set aside for %.0fs", provider, self.config.exhausted_cooldown_s)
