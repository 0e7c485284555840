"""A question-writing "model" behind the shared loopback chat server (for the LLM writer tests).

The "model" reads the clue set the writer sends as JSON and answers according to the
requested model name:

- ``faithful``: the clue statements joined into one question;
- ``leaky-once``: first names the answer (``server.answer``), then, when told the question
  was rejected, answers faithfully;
- ``drops-clue``: always leaves the last clue out.

``server.limit``: answer HTTP 500 once this many requests were served (an endpoint that goes away).
``server.bodies``: the request bodies, in order.
"""

from __future__ import annotations

import json
import re

from tests.chat_server import ChatServer as _Shared


def _statements(prompt: str) -> list[str]:
    payload = json.loads(prompt[prompt.index("{"):prompt.rindex("}") + 1])
    return [c["statement"] for c in payload["clues"]]


class ChatServer(_Shared):
    """The shared server answering as the question writer above; a context manager that serves."""

    def __init__(self):
        super().__init__(self._write)
        self.answer = ""
        self.limit: int | None = None

    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    def _write(self, body: dict) -> str | None:
        if self.limit is not None and len(self.requests) > self.limit:
            return None
        prompt = body["messages"][-1]["content"]
        statements = _statements(prompt)
        model = body["model"]
        if model == "drops-clue":
            statements = statements[:-1]
        text = "In a story of linked places and people, " + " ".join(statements) + " Which entity is X?"
        if model == "leaky-once" and "rejected" not in prompt:
            text = f"Is it {self.answer}? " + text
        return re.sub(r"\s+", " ", text)

    def __enter__(self):
        import threading

        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()
