"""HTTP for every adapter: the shared cache, the shared rate limiter, and errors mapped.

A request goes through :meth:`Transport.request`: requests-cache answers it from the cache
when it can; only on a miss does the mounted :class:`envs.live.connection.LimitedAdapter`
take a slot from the limiter (so cache hits cost no quota) and send it, under a total
deadline and with a cap on the decompressed body. Agent-chosen URLs (``guarded=True``) go
through a second session whose connections refuse internal addresses. Transport errors
become the taxonomy of :mod:`envs.live.errors`; status codes are mapped by :func:`check_status` (adapters refine it
where a provider uses codes its own way).
"""

from __future__ import annotations

import email.utils
import os
import sqlite3
import threading
import time
import urllib.request
from typing import Any

import requests
import urllib3.exceptions

from envs.live.body import ACCEPT_ENCODING
from envs.live.cache import cached_session, open_cache
from envs.live.config import LiveConfig
from envs.live.connection import LimitedAdapter, RequestContext, request_context
from envs.live.errors import AuthOrQuota, BadResponse, LiveError, NotFound, RateLimited, Retryable, Unreachable
from envs.live.limiter import RateLimiter
from envs.live.redact import install_log_filter

DO_NOT_CACHE = 0x0D0E0200020704  # requests-cache's "skip the cache entirely" value


class Transport:
    """Per-thread sessions over one cache database and one limiter."""

    def __init__(self, config: LiveConfig, limiter: RateLimiter):
        install_log_filter()
        self.config = config
        self.limiter = limiter
        self.cache = open_cache(config.resolved_cache_path(), config.max_page_bytes) if config.cache else None
        self._local = threading.local()
        self._pid = os.getpid()

    def session(self, guarded: bool = False) -> requests.Session:
        """This thread's session (requests' sessions are not promised to be thread-safe);
        ``guarded``: the one for agent-chosen URLs, whose connections refuse internal
        addresses unless ``allow_private_urls``."""
        if self._pid != os.getpid():  # forked: an SQLite connection must not cross a fork
            self._pid, self._local = os.getpid(), threading.local()
            if self.cache is not None:
                self.cache = open_cache(self.config.resolved_cache_path(), self.config.max_page_bytes)
        name = "page_session" if guarded else "session"
        session = getattr(self._local, name, None)
        if session is None:
            session = cached_session(self.cache) if self.cache is not None else requests.Session()
            # requests re-reads the proxy variables (and ~/.netrc) on every request when
            # trust_env is on: a large share of a cache hit's cost. Without any proxy variable
            # there is nothing to honour, so it is switched off.
            session.trust_env = self.config.trust_env and bool(urllib.request.getproxies_environment())
            session.headers["User-Agent"] = self.config.user_agent
            session.headers["Accept-Encoding"] = ACCEPT_ENCODING  # only what the capped reader inflates
            adapter = LimitedAdapter(self.limiter, guard=guarded and not self.config.allow_private_urls,
                                     max_bytes=self.config.max_page_bytes)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            setattr(self._local, name, session)
        return session

    def request(self, source: str, method: str, url: str, *, deadline: float, timeout_key: str | None = None,
                guarded: bool = False, **kwargs: Any) -> requests.Response:
        """Send (or answer from the cache) one request for ``source``; raise a LiveError on
        a transport failure. The status code is not checked here. ``deadline`` bounds the
        whole request (connecting, waiting, reading); the body is capped at
        ``max_page_bytes`` decompressed (TooLarge). ``guarded``: ``url`` is agent-chosen
        (see :mod:`envs.live.netpolicy`); pass ``allow_redirects=False`` and check each hop."""
        remaining = deadline - time.time()
        if remaining <= 0:
            raise Retryable(source, "deadline reached before the request could be sent")
        read = min(self.config.timeouts.get(timeout_key or source, 30.0), remaining)
        headers = dict(kwargs.pop("headers", None) or {})
        if self.cache is not None:
            expiry = self.config.cache_expiry.get(source, -1)
            kwargs["expire_after"] = DO_NOT_CACHE if expiry == 0 else (-1 if expiry < 0 else int(expiry))
        context = RequestContext(source=source, deadline=deadline, max_bytes=self.config.max_page_bytes)
        try:
            with request_context(context):
                return self.session(guarded).request(
                    method, url, headers=headers, timeout=(min(self.config.connect_timeout, remaining), read), **kwargs)
        except LiveError:
            raise
        except requests.Timeout:
            raise Retryable(source, f"timed out after {read:.1f}s") from None
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError):
            raise Retryable(source, "the reply was cut off (truncated body)") from None
        except requests.ConnectionError as e:
            if _is_name_resolution(e):  # no network or no such host: a retry in a second fails too
                raise Unreachable(source, f"connection failed ({_reason(e)})") from None
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
        for name in ("session", "page_session"):
            session = getattr(self._local, name, None)
            if session is not None:
                session.close()
                setattr(self._local, name, None)


def _is_name_resolution(error: Exception) -> bool:
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, urllib3.exceptions.NameResolutionError):
            return True
        error = error.args[0] if error.args and isinstance(error.args[0], Exception) else error.__context__
        seen += 1
    return False


def _reason(error: Exception) -> str:
    text = str(error)
    for marker in ("Connection reset", "Connection refused", "Connection aborted", "RemoteDisconnected",
                   "Name or service not known", "Temporary failure in name resolution", "No address associated",
                   "timed out"):
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
