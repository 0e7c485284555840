"""The one small error taxonomy every live source maps its failures into.

Adapters translate a provider's status codes, bodies and transport errors into these
kinds; the retry policy and the fallback chain decide by kind alone:

- :class:`Retryable`: transient (5xx, connection reset, timeout, truncated body); retry.
- :class:`RateLimited`: 429 or a local QPS budget that would overrun the deadline; retry
  after ``retry_after`` seconds when the provider said so.
- :class:`AuthOrQuota`: bad key, spent credits; never retried, and the source is set aside.
- :class:`NotFound`: the page does not exist (or refuses us); never retried on that source.
- :class:`BadResponse`: a reply we cannot parse (malformed JSON, an HTML error page); retried,
  because providers return such pages transiently. :class:`TooLarge` (a reply over
  ``max_page_bytes``, counted after decompression) is one that is not retried.
- :class:`Blocked`: the network policy refused an agent-chosen URL (not http(s), or an
  internal address); never retried, and no other source is tried for it.
- :class:`Unreachable`: the host name does not resolve (no network, no such host); not
  retried on that source, since a name that fails now fails a second later too.

Every message passes through :func:`envs.live.redact.scrub`, so no API key ever rides along
in an exception, a log line, ``info`` or a trajectory.
"""

from __future__ import annotations

from envs.live.redact import scrub


class LiveError(Exception):
    """A failure of one live source, with a message safe to show the model and the logs."""

    retryable: bool = False

    def __init__(self, source: str, message: str, status: int | None = None):
        self.source = source
        self.message = scrub(message)
        self.status = status
        """The HTTP status behind the error, when there was one."""
        super().__init__(f"{source}: {self.message}")

    @property
    def kind(self) -> str:
        """The taxonomy name (``retryable``, ``rate_limited``, ...) for metrics."""
        return _KIND[type(self)]


class Retryable(LiveError):
    """A transient failure: server error, reset connection, timeout, truncated body."""

    retryable = True


class RateLimited(Retryable):
    """Too many requests; ``retry_after`` is the provider's hint in seconds, if it gave one."""

    def __init__(self, source: str, message: str, retry_after: float | None = None):
        super().__init__(source, message)
        self.retry_after = retry_after


class AuthOrQuota(LiveError):
    """A key that is wrong, missing or out of credits: retrying cannot help."""


class NotFound(LiveError):
    """The resource does not exist at the source (or the source refuses to serve it)."""


class BadResponse(LiveError):
    """A reply that does not parse as the provider's format (malformed, truncated, HTML)."""

    retryable = True


class TooLarge(BadResponse):
    """A reply bigger than the configured cap (after decompression); retrying cannot help."""

    retryable = False


class Blocked(LiveError):
    """The network policy refused the URL (scheme, or an internal address on some hop)."""


class Unreachable(LiveError):
    """The host name did not resolve (no network, no such host, resolver timeout)."""


_KIND = {
    LiveError: "error",
    Retryable: "retryable",
    RateLimited: "rate_limited",
    AuthOrQuota: "auth_or_quota",
    NotFound: "not_found",
    BadResponse: "bad_response",
    TooLarge: "too_large",
    Blocked: "blocked",
    Unreachable: "unreachable",
}
