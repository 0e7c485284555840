"""A small client for OpenAI-compatible ``POST <base>/chat/completions`` endpoints.

Shared by the model summarizer (:mod:`wiki_sim.summarizers`) and the LLM judge
(:mod:`envs.judges`). Built on ``urllib`` with one request object per call, so one
:class:`ChatClient` can be used from many threads at once. Failures raise
:class:`ChatError`, whose message names the URL and the cause but never the API key.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Sequence


class ChatError(RuntimeError):
    """The endpoint gave no usable answer (unreachable, timeout, HTTP error, not a chat completion)."""


class ChatClient:
    """Chat completions from ``<base_url>/chat/completions`` with optional retries.

    ``base_url`` is the API root including the version prefix (``http://127.0.0.1:8000/v1``);
    ``api_key``, when given, is sent as a bearer token and shown nowhere else (not in errors,
    not in ``repr``); ``timeout`` is seconds per request; ``max_retries`` retries connection
    errors, timeouts, HTTP 429 and 5xx, the first after ``backoff`` seconds, doubling.
    The callers' config dataclasses (``OpenAISummarizer``, ``LLMJudge``) document the fields.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 max_retries: int = 0, backoff: float = 1.0):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("model must be a non-empty model name")
        if not timeout > 0 or max_retries < 0 or backoff < 0:
            raise ValueError(f"expected timeout > 0, max_retries >= 0, backoff >= 0; got "
                             f"{timeout}, {max_retries}, {backoff}")
        self.base_url, self.model, self.api_key = base_url, model, api_key
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff

    def __repr__(self) -> str:
        return f"ChatClient({self.base_url!r}, {self.model!r}, retries={self.max_retries})"

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def complete(self, messages: str | Sequence[dict], *, temperature: float = 0.0,
                 max_tokens: int | None = None) -> str:
        """The answer's text for a prompt (sent as one user message) or a message list."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        body: dict = {"model": self.model, "messages": list(messages), "temperature": temperature}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.endpoint, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code} from {self.endpoint}"
                if exc.code != 429 and exc.code < 500:  # a client error will not go away on retry
                    break
                continue
            except (TimeoutError, urllib.error.URLError, OSError) as exc:
                error = self._describe(exc)
                continue
            return self._content(raw)
        raise ChatError(self._redact(f"request failed after {attempt + 1} attempt(s): {error}"))

    def _describe(self, exc: BaseException) -> str:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            return f"no answer within {self.timeout:g} s from {self.endpoint}"
        return f"cannot reach {self.endpoint} ({type(reason).__name__}: {reason})"

    def _content(self, raw: bytes) -> str:
        try:
            content = json.loads(raw.decode("utf-8"))["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ChatError(f"the response from {self.endpoint} is not a chat completion") from None
        return "" if content is None else str(content)

    def _redact(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text
