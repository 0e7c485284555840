"""Goal-focused summaries by a model behind an OpenAI-compatible ``/chat/completions``.

The model is asked, with the paper's visit prompt shared with :mod:`wiki_sim.summarizers`,
for JSON with ``rational``, ``evidence`` and ``summary``; the reply becomes a :class:`wiki_sim.focus.Focused`. Requests
are cached like any POST (page text and goal in the body), so a repeated visit costs nothing.
"""

from __future__ import annotations

from envs.live.adapters.base import Reply, from_cache
from envs.live.config import LiveConfig
from envs.live.errors import AuthOrQuota, BadResponse
from envs.live.transport import Transport, check_status, json_body
from wiki_sim.focus import Focused
from wiki_sim.summarizers import PROMPT, parse_answer


def parse_summary(content: str) -> Focused:
    """The evidence and summary in a model's reply (:func:`wiki_sim.summarizers.parse_answer`:
    JSON, possibly fenced or after a ``<think>`` block); ValueError when there is none."""
    evidence, summary = parse_answer(content, list_joiner="\n")
    return Focused(evidence=evidence or "(none)", summary=summary or "(none)")


class ModelSummarizer:
    """``POST <base>/chat/completions`` with temperature 0; optional bearer key."""

    name = provider = "summarizer"

    def __init__(self, transport: Transport, config: LiveConfig):
        self.transport, self.config = transport, config

    def available(self) -> bool:
        return self.config.has_key("summarizer")

    def summarize(self, *, url: str, title: str, text: str, goal: str, deadline: float) -> Reply[Focused]:
        content = text[: self.config.summarizer_input_chars]
        if title:
            content = f"# {title}\n\n{content}"
        headers = {}
        if self.config.summarizer_api_key:
            headers["Authorization"] = f"Bearer {self.config.summarizer_api_key}"
        body = {"model": self.config.summarizer_model, "temperature": 0.0,
                "messages": [{"role": "user", "content": PROMPT.format(content=content, goal=goal)}]}
        response = self.transport.request(self.provider, "POST", self.config.base_urls["summarizer"] + "/chat/completions",
                                          deadline=deadline, json=body, headers=headers)
        if response.status_code == 400:  # e.g. the page is longer than the model's context
            error = BadResponse(self.name, "request rejected (HTTP 400)", status=400)
            error.retryable = False
            raise error
        if response.status_code == 429 and "insufficient_quota" in response.text:
            raise AuthOrQuota(self.name, "quota spent (HTTP 429 insufficient_quota)", status=429)
        check_status(self.name, response)
        data = json_body(self.name, response, self.transport)
        try:
            message = data["choices"][0]["message"]["content"]
            focused = parse_summary(message)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            self.transport.forget(response)
            raise BadResponse(self.name, f"no evidence/summary in the model's reply ({type(e).__name__})") from None
        return Reply(focused, from_cache(response))
