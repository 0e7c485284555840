"""A loopback OpenAI-compatible chat server for tests (started by the tests themselves, on 127.0.0.1).

``reply(body)`` decides every answer to ``POST /v1/chat/completions``: a string is sent as
the assistant message of a chat completion, ``None`` as an HTTP 500 (an endpoint that is
down), a :class:`Raw` as it is (any status and JSON payload). Any other path gets a 404.
Every request is recorded in ``server.requests`` as ``{"path", "auth", "body"}``.

    with chat_server(lambda body: "hello") as server:
        client(server.base_url, ...)
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Union

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Raw:
    """An answer sent as it is: HTTP ``status`` with ``payload`` as its JSON body."""

    status: int
    payload: Any


Reply = Callable[[dict], Union[str, Raw, None]]


class ChatServer(ThreadingHTTPServer):
    """Answers ``/v1/chat/completions`` with ``reply(body)``; records every request."""

    daemon_threads = True

    def __init__(self, reply: Reply):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.requests: list[dict] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.path != COMPLETIONS_PATH:
            self._send(404, {"error": f"no route {self.path}"})
            return
        content = self.server.reply(body)
        if content is None:
            self._send(500, {"error": "down"})
        elif isinstance(content, Raw):
            self._send(content.status, content.payload)
        else:
            self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model", ""),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": content}}]})

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def chat_server(reply: Reply) -> Iterator[ChatServer]:
    """A :class:`ChatServer` serving in a daemon thread for the ``with`` block, then shut down and closed."""
    server = ChatServer(reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
