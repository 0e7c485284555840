"""Running an ASGI app the way every server here runs: one command, 127.0.0.1 by default,
a request-body cap, a clean stop on SIGTERM, and one line saying where it listens."""

from __future__ import annotations

import socket
import sys
from typing import Any, Callable

GRACEFUL_STOP_S = 5.0
"""On SIGTERM, open connections get this long to finish before they are closed."""


def body_limit(app: Any, max_bytes: int) -> Callable:
    """ASGI middleware: an HTTP request whose body passes ``max_bytes`` gets 413 and a one-line
    JSON error (by its Content-Length, or while it streams in); websocket messages are capped
    by the server's ``ws_max_size``."""

    async def limited(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > max_bytes):
            return await _too_large(send, max_bytes)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > max_bytes:
                raise _TooLarge()
            return message

        try:
            await app(scope, counted, send)
        except _TooLarge:
            await _too_large(send, max_bytes)

    return limited


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


class _TooLarge(Exception):
    pass


async def _too_large(send: Callable, max_bytes: int) -> None:
    body = (f'{{"error": "request body over {max_bytes} bytes; send a smaller request"}}').encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def serve(app: Any, host: str, port: int, *, name: str, max_request_bytes: int) -> int:
    """Serve ``app`` until SIGTERM or SIGINT (uvicorn stops accepting, lets open requests finish
    for :data:`GRACEFUL_STOP_S`, runs the app's shutdown); ``port=0`` picks a free port. Prints
    ``NAME: listening on http://HOST:PORT`` on stderr once the socket is bound."""
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
    config = uvicorn.Config(body_limit(app, max_request_bytes), log_level="warning",
                            ws_max_size=max_request_bytes, timeout_graceful_shutdown=GRACEFUL_STOP_S,
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
