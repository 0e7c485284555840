"""A loopback OpenAI-compatible chat server that plays a question-writing model (for the LLM writer tests).

The "model" reads the clue set the writer sends as JSON and answers according to the
requested model name:

- ``faithful``: the clue statements joined into one question;
- ``leaky-once``: first names the answer (``server.answer``), then, when told the question
  was rejected, answers faithfully;
- ``drops-clue``: always leaves the last clue out.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict] = []
        self.answer = ""
        self.limit: int | None = None
        """Answer HTTP 500 once this many requests were served (an endpoint that goes away)."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def _statements(prompt: str) -> list[str]:
    payload = json.loads(prompt[prompt.index("{"):prompt.rindex("}") + 1])
    return [c["statement"] for c in payload["clues"]]


class ChatHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        if self.server.limit is not None and len(self.server.requests) > self.server.limit:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        prompt = body["messages"][-1]["content"]
        statements = _statements(prompt)
        model = body["model"]
        if model == "drops-clue":
            statements = statements[:-1]
        text = "In a story of linked places and people, " + " ".join(statements) + " Which entity is X?"
        if model == "leaky-once" and "rejected" not in prompt:
            text = f"Is it {self.server.answer}? " + text
        text = re.sub(r"\s+", " ", text)
        data = json.dumps({"id": "x", "object": "chat.completion", "model": model,
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": text}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
