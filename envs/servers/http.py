"""Running an ASGI app the way every server here runs: one command, 127.0.0.1 by default, and
the same defences in front of every app (:func:`guard`, :func:`protocol_class`):

- **Host and Origin** (:func:`check_origin`): on a loopback address the ``Host`` header must
  name loopback (``127.0.0.1``, ``localhost``, ``[::1]``), which stops DNS rebinding; an
  ``Origin`` header, when a browser sends one, must be the server's own origin, so no web page
  can reach the server from a browser (HTTP or websocket). A ``POST`` must be
  ``application/json``, which a page cannot send to another origin without the browser asking
  first.
- **Request bodies** are read whole, up to the cap, before the app sees them: a larger one gets
  413 and a one-line JSON error (declared by ``Content-Length`` or chunked).
- **Time and connections**: a connection must deliver each request's headers and body within
  ``read_timeout_s`` (else 408 and closed); at most ``max_connections`` are open at once,
  websockets included (past the cap, the connection that has waited longest for its request is
  closed to make room; when every connection is being served, the new one gets 503).
- a clean stop on SIGTERM, and one line saying where it listens.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from typing import Any, Callable
from urllib.parse import urlsplit

GRACEFUL_STOP_S = 5.0
"""On SIGTERM, open connections get this long to finish before they are closed."""
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names a server bound on loopback answers to (IPv6 without brackets)."""


def is_loopback(bind: str) -> bool:
    return bind.strip("[]") in LOOPBACK_NAMES


def _hostname(netloc: str) -> str | None:
    """The host name of ``host[:port]`` (brackets of an IPv6 literal dropped), lower case; None when malformed."""
    try:
        parts = urlsplit(f"//{netloc}")
        parts.port  # raises on a malformed port
    except ValueError:
        return None
    return (parts.hostname or "").lower() or None


def check_origin(headers: dict[bytes, bytes], bind: str) -> tuple[int, str] | None:
    """``(status, reason)`` when the request's ``Host``/``Origin`` headers are not this server's
    (None: accepted). On a loopback ``bind`` the Host must name loopback; elsewhere any Host is
    accepted. An Origin, when present, must be ``http(s)://`` the Host itself (on loopback: any
    loopback name and port); ``Origin: null`` is refused."""
    host = headers.get(b"host", b"").decode("latin-1").strip()
    name = _hostname(host) if host else None
    if name is None or (is_loopback(bind) and name not in LOOPBACK_NAMES):
        return 421, "Invalid Host header: this server answers only to its own address"
    origin = headers.get(b"origin")
    if origin is None:
        return None  # not a browser, or a same-origin request that carries none
    try:
        parts = urlsplit(origin.decode("latin-1").strip())
        ok = parts.scheme in ("http", "https") and not parts.path.strip("/") and (
            (parts.hostname or "").lower() in LOOPBACK_NAMES if is_loopback(bind) else parts.netloc.lower() == host.lower())
    except ValueError:
        ok = False
    return None if ok else (403, "Invalid Origin header: requests from web pages are refused")


def guard(app: Any, bind: str, max_bytes: int) -> Callable:
    """ASGI middleware in front of every server's app: :func:`check_origin` on HTTP requests and
    websocket handshakes (a refused websocket gets 403), ``Content-Type: application/json`` on POSTs,
    and the body read whole up to ``max_bytes`` before the app sees it (413 past it, whether the
    size was declared or the body was chunked). Websocket messages are capped by the server's
    ``ws_max_size``."""

    async def guarded(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        refused = check_origin(headers, bind)
        if scope["type"] == "websocket":
            if refused:
                return await send({"type": "websocket.close", "code": 1008})  # before accept: HTTP 403
            return await app(scope, receive, send)
        if refused:
            return await _reply(send, *refused)
        if scope["method"] == "POST":
            kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if kind != b"application/json":
                return await _reply(send, 415, "a POST must be Content-Type: application/json")
        length = headers.get(b"content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > max_bytes):
            return await _too_large(send, max_bytes)
        body, messages = bytearray(), []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left (or took too long: the connection was closed)
            body += message.get("body", b"")
            if len(body) > max_bytes:
                return await _too_large(send, max_bytes)
            if not message.get("more_body", False):
                break
        messages.append({"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> dict:
            return messages.pop() if messages else await receive()

        await app(scope, replay, send)

    return guarded


async def _reply(send: Callable, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _too_large(send: Callable, max_bytes: int) -> None:
    await _reply(send, 413, f"request body over {max_bytes} bytes; send a smaller request")


def _raw_reply(status: int, reason: str, error: str) -> bytes:
    body = json.dumps({"error": error}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode() + body


def protocol_class(read_timeout_s: float, max_connections: int) -> type:
    """uvicorn's h11 HTTP protocol with a read deadline and a connection cap.

    Each request's headers and body must arrive within ``read_timeout_s`` of the connection opening
    (or of the previous response ending); a slower one gets 408 and is closed, so a slow client
    (one byte a minute, or a body sent halfway) holds nothing for long. At most ``max_connections``
    are open at once (websockets included): a new connection past the cap closes the connection
    that has waited longest for its request to arrive (408), so slow clients cannot lock fresh
    ones out; when none is waiting (every connection is being served), the new one gets 503 and
    is closed at once."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    too_many = _raw_reply(503, "Service Unavailable", "too many connections; try again shortly")
    too_slow = _raw_reply(408, "Request Timeout", f"the request did not arrive in time (at most {read_timeout_s:g} s, "
                          "less while the server is full)")

    class GuardedH11Protocol(H11Protocol):
        _timer = None
        _since = 0.0
        _refused = False

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            if len(self.server_state.connections) >= max_connections and not self._evict_slowest():
                self._refused = True
                transport.write(too_many)
                transport.close()
                return
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if not self._refused:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self._refused:
                super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self._timer is not None and self.conn.their_state is not h11.IDLE and \
                    self.conn.their_state is not h11.SEND_BODY:
                self._disarm()  # the whole request is in: the app's time is the app's deadline

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._disarm()  # the websocket protocol takes the connection (its own pings and size cap)
            super().handle_websocket_upgrade(event)

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self._arm()  # the next request gets its own deadline (before a pipelined one is read)
            super().on_response_complete()

        def _evict_slowest(self) -> bool:
            """Close the connection that has waited longest for its request (408); False when no
            connection is waiting for one."""
            waiting = [c for c in self.server_state.connections
                       if isinstance(c, GuardedH11Protocol) and c._timer is not None and not c.transport.is_closing()]
            if not waiting:
                return False
            min(waiting, key=lambda c: c._since)._timed_out()
            return True

        def _arm(self) -> None:
            self._disarm()
            self._since = time.monotonic()
            self._timer = self.loop.call_later(read_timeout_s, self._timed_out)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _timed_out(self) -> None:
            self._disarm()
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete or not self.cycle.response_started:
                self.transport.write(too_slow)  # no response under way: say why before closing
            self.transport.close()

    return GuardedH11Protocol


def _server_class() -> type:
    import contextlib
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that after a graceful stop on SIGTERM/SIGINT the process exits
        normally (status 0) instead of re-raising the signal."""

        @contextlib.contextmanager
        def capture_signals(self):
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGTERM, signal.SIGINT)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server


def _Server(config: Any) -> Any:
    return _server_class()(config)


def serve(app: Any, host: str, port: int, *, name: str, limits: Any) -> int:
    """Serve ``app`` behind :func:`guard` and :func:`protocol_class` with ``limits``
    (:class:`envs.servers.limits.ServerLimits`) until SIGTERM or SIGINT (uvicorn stops accepting,
    lets open requests finish for :data:`GRACEFUL_STOP_S`, runs the app's shutdown); ``port=0``
    picks a free port. Prints ``NAME: listening on http://HOST:PORT`` on stderr once the socket is
    bound."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(guard(app, host, limits.max_request_bytes), log_level="warning",
                            http=protocol_class(limits.read_timeout_s, limits.max_connections),
                            ws_max_size=limits.max_request_bytes, timeout_graceful_shutdown=GRACEFUL_STOP_S,
                            lifespan="on")
    server = _Server(config)
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"{name}: listening on http://{shown}:{bound}", file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    print(f"{name}: stopped", file=sys.stderr, flush=True)
    return 0
