"""A loopback OpenAI-compatible chat server, healthy or hostile, for tests and benchmarks.

``FakeChatServer(reply=fn, mode=...)`` listens on 127.0.0.1 (a free port) and answers
``POST /v1/chat/completions``. ``fn(body) -> (content, finish_reason)`` writes the reply of a
healthy server; ``mode`` makes it hostile:

- ``ok``: the reply ``fn`` writes;
- ``dribble``: the reply's headers, then one byte of body every ``interval`` seconds (at most
  ``dribble_bytes`` bytes, so the server's own loop is bounded);
- ``huge``: a chat completion of ``huge_bytes`` bytes, without Content-Length (streamed);
- ``huge_declared``: the same with its Content-Length;
- ``fail``: HTTP 500 every time;
- ``redirect``: ``redirect_status`` to ``redirect_to`` (another server: another origin);
- ``hang``: accepts, reads the request, answers nothing for ``interval`` seconds, then closes.

Every request's path and headers are kept in ``requests`` (the ``Authorization`` header
included, which is what a redirect test looks for). Nothing here reaches past 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Literal

Mode = Literal["ok", "dribble", "huge", "huge_declared", "fail", "redirect", "hang"]
ReplyFn = Callable[[dict], "tuple[str, str]"]


def completion(content: str, finish_reason: str = "stop") -> bytes:
    """A chat completion's JSON bytes."""
    return json.dumps({"choices": [{"index": 0, "finish_reason": finish_reason,
                                    "message": {"role": "assistant", "content": content}}]}).encode()


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 64 << 20))
        with owner.lock:
            owner.requests.append((self.path, dict(self.headers)))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        try:
            getattr(self, f"_{owner.mode}")(owner, body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: what a deadline does
            pass

    def do_GET(self) -> None:  # noqa: N802 (a redirected POST may arrive as a GET: recorded, refused)
        with self.server.owner.lock:
            self.server.owner.requests.append((self.path, dict(self.headers)))
        self._send(405, b'{"error": "use POST"}')

    def _send(self, status: int, payload: bytes, length: bool = True, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if length:
            self.send_header("Content-Length", str(len(payload)))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def _ok(self, owner: "FakeChatServer", body: dict) -> None:
        content, reason = owner.reply(body)
        self._send(200, completion(content, reason))

    def _fail(self, owner: "FakeChatServer", body: dict) -> None:
        self._send(500, b'{"error": "internal"}')

    def _redirect(self, owner: "FakeChatServer", body: dict) -> None:
        self._send(owner.redirect_status, b"", headers={"Location": owner.redirect_to})

    def _dribble(self, owner: "FakeChatServer", body: dict) -> None:
        content, reason = owner.reply(body)
        payload = completion(content, reason)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(max(len(payload), owner.dribble_bytes)))
        self.end_headers()
        self.wfile.flush()
        for i in range(min(owner.dribble_bytes, len(payload))):
            if owner.stopped.wait(owner.interval):
                return
            self.wfile.write(payload[i:i + 1])
            self.wfile.flush()

    def _huge(self, owner: "FakeChatServer", body: dict, declared: bool = False) -> None:
        head = b'{"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "'
        tail = b'"}}]}'
        filler = owner.huge_bytes - len(head) - len(tail)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if declared:
            self.send_header("Content-Length", str(len(head) + filler + len(tail)))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(head)
        block = b"x" * (1 << 20)
        for start in range(0, filler, len(block)):
            if owner.stopped.is_set():
                return
            self.wfile.write(block[: min(len(block), filler - start)])
        self.wfile.write(tail)

    def _huge_declared(self, owner: "FakeChatServer", body: dict) -> None:
        self._huge(owner, body, declared=True)

    def _hang(self, owner: "FakeChatServer", body: dict) -> None:
        owner.stopped.wait(owner.interval)
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "FakeChatServer"


class FakeChatServer:
    """An OpenAI-compatible server on 127.0.0.1; use as a context manager (or ``close()``)."""

    def __init__(self, reply: ReplyFn | None = None, mode: Mode = "ok", *, interval: float = 0.5,
                 dribble_bytes: int = 1000, huge_bytes: int = 100 << 20, redirect_to: str = "",
                 redirect_status: int = 307):
        self.reply: ReplyFn = reply or (lambda body: ("ok", "stop"))
        self.mode, self.interval, self.dribble_bytes, self.huge_bytes = mode, interval, dribble_bytes, huge_bytes
        self.redirect_to, self.redirect_status = redirect_to, redirect_status
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-chat")
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeChatServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
