"""Goal-focused summaries by a model behind an OpenAI-compatible ``/chat/completions``.

The model is asked, as the paper's visit tool asks it, for JSON with ``rational``,
``evidence`` and ``summary``; the reply becomes a :class:`wiki_sim.focus.Focused`. Requests
are cached like any POST (page text and goal in the body), so a repeated visit costs nothing.
"""

from __future__ import annotations

import json
import re

from envs.live.adapters.base import Reply, from_cache
from envs.live.config import LiveConfig
from envs.live.errors import AuthOrQuota, BadResponse
from envs.live.transport import Transport, check_status, json_body
from wiki_sim.focus import Focused

PROMPT = """Read the web page below and extract what serves the user's goal.

## Web page
{content}

## User goal
{goal}

## What to do
1. Rational: find the parts of the page that bear directly on the goal.
2. Evidence: copy the most relevant passages, keeping their original wording and full context; miss nothing important (several paragraphs are fine).
3. Summary: one concise paragraph that organizes the evidence and says how it answers the goal.

Reply with a JSON object with the fields "rational", "evidence" and "summary"."""

_THINK = re.compile(r"<think>.*?</think>", re.S)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_summary(content: str) -> Focused:
    """The evidence and summary in a model's reply (JSON, possibly fenced or after a
    ``<think>`` block); ValueError when there is none."""
    content = _THINK.sub("", content or "").strip()
    fenced = _FENCE.search(content)
    candidate = fenced.group(1) if fenced else content
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    data = json.loads(candidate[start:end + 1])
    if not isinstance(data, dict):
        raise ValueError("the reply's JSON is not an object")

    def field(name: str) -> str:
        value = data.get(name)
        if isinstance(value, list):
            value = "\n".join(str(v) for v in value)
        return str(value).strip() if value is not None else ""

    evidence, summary = field("evidence"), field("summary")
    if not evidence and not summary:
        raise ValueError("the reply has neither evidence nor summary")
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
