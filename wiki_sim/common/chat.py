"""A small client for OpenAI-compatible ``POST <base>/chat/completions`` endpoints.

Shared by every caller of such an endpoint: the model summarizer (:mod:`wiki_sim.summarizers`),
the LLM judge (:mod:`envs.judges`), the LLM question writer (:mod:`sailorfog.writers`), thought
rewriting (:mod:`trainers.thoughts`) and the text policy (:class:`trainers.policies.OpenAIPolicy`,
through :func:`post_json`). An endpoint is as hostile as a web page, so every request has:

- a **total deadline**: ``timeout`` seconds for the whole request (connect, send, the status
  line, the headers and the complete body). A watchdog shuts the socket down when it passes,
  so a server that sends one byte every half second is cut off at the deadline, not when it
  stops;
- a **size cap**: a reply over ``max_bytes`` is refused as soon as it is known to be one
  (``Content-Length``, or the bytes read so far), never read whole;
- **no credentials to other origins**: a redirect to another scheme, host or port is not
  followed when an API key would be sent (a move from ``http`` to ``https`` on the same host is).

Built on ``http.client`` with one connection per request, so one :class:`ChatClient` can be
used from many threads at once. Failures raise :class:`ChatError`, whose message names the URL
and the cause but never the API key.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Sequence

from wiki_sim.common.errors import UserError

DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
"""Replies larger than this are refused (a chat completion of a few thousand tokens is kilobytes)."""
MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)
_CHUNK = 64 * 1024


class ChatError(RuntimeError):
    """The endpoint gave no usable answer (unreachable, timeout, HTTP error, not a chat completion)."""

    def __init__(self, message: str, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable, self.status = retryable, status


@dataclass
class ChatReply:
    """One chat completion: the text and why the model stopped."""

    content: str
    finish_reason: str
    """As the endpoint says: ``stop``, ``length`` (cut off by ``max_tokens``), ... (``""`` if absent)."""


def check_url(base_url: str) -> None:
    """:class:`UserError` unless ``base_url`` is an http(s) URL with a host."""
    parts = urllib.parse.urlsplit(base_url) if isinstance(base_url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"base_url must be an http(s) URL, got {base_url!r}")


def _origin(parts: urllib.parse.SplitResult) -> tuple[str, str, int]:
    return parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)


def _same_origin(old: urllib.parse.SplitResult, new: urllib.parse.SplitResult) -> bool:
    """Same scheme, host and port, or an upgrade from http to https on the same host."""
    a, b = _origin(old), _origin(new)
    return a == b or (a[0] == "http" and b[0] == "https" and a[1] == b[1] and b[2] == 443)


class _Watchdog:
    """Shuts a connection's socket down when the deadline passes (unblocking any read)."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float):
        self.fired = False
        self._conn = conn
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed
                pass

    def cancel(self) -> None:
        self._timer.cancel()


def _read_capped(response: http.client.HTTPResponse, max_bytes: int, url: str) -> bytes:
    declared = response.getheader("Content-Length")
    if declared and declared.strip().isdigit() and int(declared) > max_bytes:
        raise ChatError(f"the reply from {url} declares {int(declared)} bytes, over the cap of {max_bytes}")
    parts, size = [], 0
    while True:
        chunk = response.read(_CHUNK)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > max_bytes:
            raise ChatError(f"the reply from {url} is over the cap of {max_bytes} bytes; not read further")
        parts.append(chunk)


def _post_once(url: str, data: bytes, headers: dict[str, str], deadline: float, timeout: float,
               max_bytes: int) -> tuple[int, dict[str, str], bytes]:
    """One POST (no redirects) that ends by ``deadline`` (a ``time.monotonic()`` value)."""
    parts = urllib.parse.urlsplit(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise ChatError(f"no time left for a request to {url}", retryable=False)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=left)
    watchdog = _Watchdog(conn, left)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=data, headers=headers)
        response = conn.getresponse()
        status = response.status
        reply_headers = {k.lower(): v for k, v in response.getheaders()}
        body = b"" if status in _REDIRECTS else _read_capped(response, max_bytes, url)
        if watchdog.fired:  # the shut-down socket reads as the end of the reply: it is not one
            raise TimeoutError
        return status, reply_headers, body
    except ChatError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if watchdog.fired or isinstance(exc, (TimeoutError, socket.timeout)):
            raise ChatError(f"no answer within {timeout:g} s from {url} (the whole request is timed: a reply "
                            "that is still arriving at the deadline is cut off)", retryable=True) from None
        raise ChatError(f"cannot reach {url} ({type(exc).__name__}: {exc})", retryable=True) from None
    finally:
        watchdog.cancel()
        conn.close()


def post_json(url: str, body: dict[str, Any], *, api_key: str | None, timeout: float,
              max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> Any:
    """POST ``body`` as JSON to ``url`` and return the reply's JSON, all within ``timeout``
    seconds and ``max_bytes`` of reply; redirects followed to the same origin only (to any
    origin when there is no ``api_key``), at most :data:`MAX_REDIRECTS`. ``ChatError`` otherwise,
    with ``retryable`` set for connection errors, deadlines, HTTP 429 and 5xx."""
    deadline = time.monotonic() + timeout
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        status, reply_headers, raw = _post_once(current, data, headers, deadline, timeout, max_bytes)
        if status not in _REDIRECTS:
            break
        target = urllib.parse.urljoin(current, reply_headers.get("location", ""))
        old, new = urllib.parse.urlsplit(current), urllib.parse.urlsplit(target)
        if new.scheme not in ("http", "https") or not new.hostname:
            raise ChatError(f"{current} redirected to {target[:200]!r}, which is not an http(s) URL", status=status)
        if api_key and not _same_origin(old, new):
            raise ChatError(f"{current} redirected to another origin ({new.scheme}://{new.netloc}); not followed, so "
                            "that the API key is not sent there. Set the base URL to the endpoint itself",
                            status=status)
        current = target
    else:
        raise ChatError(f"{url}: more than {MAX_REDIRECTS} redirects", status=status)
    if status >= 400:
        raise ChatError(f"HTTP {status} from {current}", retryable=status == 429 or status >= 500, status=status)
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ChatError(f"the reply from {current} is not JSON") from None


class ChatClient:
    """Chat completions from ``<base_url>/chat/completions`` with optional retries.

    ``base_url`` is the API root including the version prefix (``http://127.0.0.1:8000/v1``);
    ``api_key``, when given, is sent as a bearer token and shown nowhere else (not in errors,
    not in ``repr``, never to another origin); ``timeout`` is the deadline in seconds of one
    whole request (reply included); ``max_retries`` retries connection errors, deadlines, HTTP
    429 and 5xx, the first after ``backoff`` seconds, doubling; ``max_bytes`` caps a reply.
    The callers' config dataclasses (``OpenAISummarizer``, ``LLMJudge``) document the fields.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 max_retries: int = 0, backoff: float = 1.0, max_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        check_url(base_url)
        if not model:
            raise UserError("model must be a non-empty model name")
        if not timeout > 0 or max_retries < 0 or backoff < 0 or max_bytes < 1:
            raise UserError(f"expected timeout > 0, max_retries >= 0, backoff >= 0, max_bytes >= 1; got "
                             f"{timeout}, {max_retries}, {backoff}, {max_bytes}")
        self.base_url, self.model, self.api_key = base_url, model, api_key
        self.timeout, self.max_retries, self.backoff, self.max_bytes = timeout, max_retries, backoff, max_bytes

    def __repr__(self) -> str:
        return f"ChatClient({self.base_url!r}, {self.model!r}, retries={self.max_retries})"

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def complete(self, messages: str | Sequence[dict], *, temperature: float = 0.0,
                 max_tokens: int | None = None) -> str:
        """The answer's text for a prompt (sent as one user message) or a message list."""
        return self.reply(messages, temperature=temperature, max_tokens=max_tokens).content

    def reply(self, messages: str | Sequence[dict], *, temperature: float = 0.0,
              max_tokens: int | None = None) -> ChatReply:
        """The answer (text and finish reason) for a prompt or a message list."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        body: dict = {"model": self.model, "messages": list(messages), "temperature": temperature}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                return self._parse(post_json(self.endpoint, body, api_key=self.api_key, timeout=self.timeout,
                                             max_bytes=self.max_bytes))
            except ChatError as exc:
                error = str(exc)
                if not exc.retryable:  # a client error or a bad reply will not go away on retry
                    break
        raise ChatError(self._redact(f"request failed after {attempt + 1} attempt(s): {error}"))

    def _parse(self, reply: Any) -> ChatReply:
        try:
            choice = reply["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ChatError(f"the response from {self.endpoint} is not a chat completion") from None
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        return ChatReply("" if content is None else str(content), str(reason or ""))

    def _redact(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text
