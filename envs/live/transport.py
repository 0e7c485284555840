"""HTTP for every adapter: the shared cache, the shared rate limiter, and errors mapped.

A request goes through :meth:`Transport.request`: requests-cache answers it from the cache
when it can; only on a miss does the mounted :class:`LimitedAdapter` take a slot from the
limiter (so cache hits cost no quota) and send it. Transport errors become the taxonomy of
:mod:`envs.live.errors`; status codes are mapped by :func:`check_status` (adapters refine it
where a provider uses codes its own way).
"""

from __future__ import annotations

import email.utils
import math
import os
import sqlite3
import threading
import time
import urllib.request
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from envs.live.cache import cached_session, open_cache
from envs.live.config import LiveConfig
from envs.live.errors import AuthOrQuota, BadResponse, LiveError, NotFound, RateLimited, Retryable
from envs.live.limiter import RateLimiter
from envs.live.redact import install_log_filter

SOURCE_HEADER = "X-Websailor-Source"
DEADLINE_HEADER = "X-Websailor-Deadline"
DO_NOT_CACHE = 0x0D0E0200020704  # requests-cache's "skip the cache entirely" value
# Request headers requests-cache adds for its own bookkeeping; the provider need not see them.
_LOCAL_HEADERS = ("Cache-Control", "X-ACTUAL-NO-CACHE")


class LimitedAdapter(HTTPAdapter):
    """Sends a request only after the limiter grants its source a slot."""

    def __init__(self, limiter: RateLimiter):
        super().__init__(max_retries=0)  # retries are ours, counted and bounded by the deadline
        self.limiter = limiter

    def send(self, request, **kwargs):
        source = request.headers.pop(SOURCE_HEADER, "direct")
        deadline = float(request.headers.pop(DEADLINE_HEADER, "inf"))
        for name in _LOCAL_HEADERS:
            request.headers.pop(name, None)
        self.limiter.acquire(source, None if math.isinf(deadline) else deadline)
        return super().send(request, **kwargs)


class Transport:
    """Per-thread sessions over one cache database and one limiter."""

    def __init__(self, config: LiveConfig, limiter: RateLimiter):
        install_log_filter()
        self.config = config
        self.limiter = limiter
        self.cache = open_cache(config.resolved_cache_path()) if config.cache else None
        self._local = threading.local()
        self._pid = os.getpid()

    def session(self) -> requests.Session:
        """This thread's session (requests' sessions are not promised to be thread-safe)."""
        if self._pid != os.getpid():  # forked: an SQLite connection must not cross a fork
            self._pid, self._local = os.getpid(), threading.local()
            if self.cache is not None:
                self.cache = open_cache(self.config.resolved_cache_path())
        session = getattr(self._local, "session", None)
        if session is None:
            session = cached_session(self.cache) if self.cache is not None else requests.Session()
            # requests re-reads the proxy variables (and ~/.netrc) on every request when
            # trust_env is on: a large share of a cache hit's cost. Without any proxy variable
            # there is nothing to honour, so it is switched off.
            session.trust_env = self.config.trust_env and bool(urllib.request.getproxies_environment())
            session.headers["User-Agent"] = self.config.user_agent
            adapter = LimitedAdapter(self.limiter)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

    def request(self, source: str, method: str, url: str, *, deadline: float, timeout_key: str | None = None,
                **kwargs: Any) -> requests.Response:
        """Send (or answer from the cache) one request for ``source``; raise a LiveError on
        a transport failure. The status code is not checked here."""
        remaining = deadline - time.time()
        if remaining <= 0:
            raise Retryable(source, "deadline reached before the request could be sent")
        read = min(self.config.timeouts.get(timeout_key or source, 30.0), remaining)
        headers = dict(kwargs.pop("headers", None) or {})
        headers[SOURCE_HEADER] = source
        headers[DEADLINE_HEADER] = repr(deadline)
        if self.cache is not None:
            expiry = self.config.cache_expiry.get(source, -1)
            kwargs["expire_after"] = DO_NOT_CACHE if expiry == 0 else (-1 if expiry < 0 else int(expiry))
        try:
            return self.session().request(method, url, headers=headers,
                                          timeout=(min(self.config.connect_timeout, remaining), read), **kwargs)
        except LiveError:
            raise
        except requests.Timeout:
            raise Retryable(source, f"timed out after {read:.1f}s") from None
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError):
            raise Retryable(source, "the reply was cut off (truncated body)") from None
        except requests.ConnectionError as e:
            raise Retryable(source, f"connection failed ({_reason(e)})") from None
        except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                requests.exceptions.InvalidSchema) as e:
            raise NotFound(source, f"not a valid URL ({type(e).__name__})") from None
        except sqlite3.Error as e:
            raise Retryable(source, f"cache database busy ({e})") from None
        except requests.RequestException as e:
            raise Retryable(source, f"request failed ({type(e).__name__})") from None

    def forget(self, response: requests.Response) -> None:
        """Drop a reply from the cache (it turned out unparsable: don't serve it again)."""
        key = getattr(response, "cache_key", None)
        if self.cache is not None and key:
            try:
                self.cache.delete(key)
            except sqlite3.Error:
                pass  # it expires on its own; the next miss overwrites it

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None


def _reason(error: Exception) -> str:
    text = str(error)
    for marker in ("Connection reset", "Connection refused", "Connection aborted", "RemoteDisconnected",
                   "Name or service not known", "timed out"):
        if marker in text:
            return marker
    return type(error).__name__


def retry_after(response: requests.Response) -> float | None:
    """The Retry-After header in seconds (delta-seconds, fractional allowed, or HTTP-date)."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def check_status(source: str, response: requests.Response, *, what: str = "request") -> None:
    """Raise the taxonomy error for a non-2xx reply (the generic mapping)."""
    code = response.status_code
    if 200 <= code < 300:
        return
    detail = _short_body(response)
    if code == 429:
        raise RateLimited(source, f"rate limited (HTTP 429){detail}", retry_after=retry_after(response))
    if code in (401, 402, 403):
        raise AuthOrQuota(source, f"key rejected or quota spent (HTTP {code}){detail}")
    if code in (404, 410):
        raise NotFound(source, f"{what} not found (HTTP {code})", status=code)
    if code in (408, 425) or code >= 500:
        raise Retryable(source, f"server error (HTTP {code})")
    raise BadResponse(source, f"unexpected HTTP {code}{detail}")


def _short_body(response: requests.Response, limit: int = 160) -> str:
    try:
        text = response.text.strip()
    except Exception:
        return ""
    if not text or text.lstrip().startswith("<"):  # an HTML error page says nothing useful
        return ""
    text = " ".join(text.split())
    return ": " + (text[:limit] + "..." if len(text) > limit else text)


def json_body(source: str, response: requests.Response, transport: Transport) -> Any:
    """The reply's JSON, or BadResponse (and the reply dropped from the cache)."""
    try:
        return response.json()
    except ValueError:
        transport.forget(response)
        kind = "an HTML page" if response.text.lstrip()[:1] == "<" else "malformed JSON"
        raise BadResponse(source, f"expected JSON, got {kind}") from None
