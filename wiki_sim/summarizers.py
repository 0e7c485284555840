"""Model-based visit summaries through an OpenAI-compatible chat-completions endpoint.

:class:`OpenAISummarizer` implements :class:`wiki_sim.focus.Summarizer` the way the paper's
visit tool does: the page and the user goal go to a language model, which answers with JSON
``{"rational", "evidence", "summary"}``. Any failure (connection error, timeout, HTTP
error, an answer that is not that JSON) falls back to the extractive result, marked as
such in its summary, so the agent always gets an observation.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field

from wiki_sim.common.chat import ChatClient, ChatError
from wiki_sim.focus import ExtractiveSummarizer, Focused, extract

PROMPT = """Please process the following webpage content and user goal to extract relevant information:

## **Webpage Content**
{content}

## **User Goal**
{goal}

## **Task Guidelines**
1. **Content Scanning for Rational**: Locate the **specific sections/data** directly related to the user's goal within the webpage content.
2. **Key Extraction for Evidence**: Identify and extract the **most relevant information** from the content; never miss important information; output the **full original context** of the content as far as possible, it can be more than three paragraphs.
3. **Summary Output for Summary**: Organize into a concise paragraph with logical flow, prioritizing clarity, and judge the contribution of the information to the goal.

**Final Output Format: a JSON object with the fields "rational", "evidence", "summary".**
"""
FALLBACK_MARK = "[extractive fallback: {reason}]"
_BLANKS = re.compile(r"\s*")


def _without_think(text: str) -> str:
    """``text`` without its ``<think>...</think>`` blocks (reasoning models' scratchpad precedes
    the answer). Scanned with ``str.find``: the regex ``<think>.*?</think>`` rescans to the end
    from every unclosed tag, quadratic on a reply of unclosed tags."""
    parts, pos = [], 0
    while (start := text.find("<think>", pos)) >= 0:
        end = text.find("</think>", start + 7)
        if end < 0:
            break
        parts.append(text[pos:start])
        pos = end + 8
    parts.append(text[pos:])
    return "".join(parts)


def _fenced(text: str) -> str | None:
    """The body of the first closed Markdown fence (after an optional ``json`` and blanks), as
    ``re.search(r"```(?:json)?\\s*(.*?)```", text, re.DOTALL)`` finds it, in linear time."""
    start = text.find("```")
    if start < 0:
        return None
    body = start + 3 + (4 if text.startswith("json", start + 3) else 0)
    body = _BLANKS.match(text, body).end()
    end = text.find("```", body)
    return text[body:end] if end >= 0 else None


class SummaryError(ValueError):
    """The model's answer could not be used (transport failure or not the expected JSON)."""


def parse_answer(content: str | None, *, list_joiner: str = "\n\n") -> tuple[str, str]:
    """``(evidence, summary)`` from a model answer: a JSON object, possibly fenced, after a
    ``<think>`` block or surrounded by prose. A list field is joined with ``list_joiner``;
    one of the two fields may be missing. Raises :class:`SummaryError` otherwise."""
    if content is not None and not isinstance(content, str):
        raise SummaryError(f"answer is not text but {type(content).__name__}")
    text = _without_think(content or "").strip()
    if not text:
        raise SummaryError("empty answer")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        fenced = _fenced(text)
        candidate = fenced if fenced is not None else text
        start, end = candidate.find("{"), candidate.rfind("}")
        if start == -1 or end <= start:
            raise SummaryError("answer is not JSON") from None
        try:
            data = json.loads(candidate[start:end + 1])
        except json.JSONDecodeError as exc:
            raise SummaryError(f"answer is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise SummaryError("answer JSON is not an object")

    def text_field(name: str) -> str:
        value = data.get(name)
        if isinstance(value, list):
            value = list_joiner.join(str(v) for v in value)
        return "" if value is None else str(value).strip()

    evidence, summary = text_field("evidence"), text_field("summary")
    if not (evidence or summary):
        raise SummaryError('answer JSON lacks string "evidence" and "summary" fields')
    return evidence, summary


@dataclass
class OpenAISummarizer:
    """Summarize pages with a model behind an OpenAI-compatible ``/v1/chat/completions``.

    ``base_url`` is the API root including ``/v1`` (``http://127.0.0.1:8000/v1``). Pages
    longer than ``max_input_chars`` are cut down to their passages most relevant to the
    goal (the extractive ranking) before they are sent.
    """

    base_url: str
    """API root, including the version prefix (``.../v1``)."""
    model: str
    """Model name sent in the request."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token, if the endpoint wants one."""
    timeout: float = 60.0
    """Seconds to wait for one answer."""
    max_input_chars: int = 24_000
    """Page characters sent to the model at most."""
    max_tokens: int = 2048
    """Answer length limit, in tokens."""
    temperature: float = 0.0
    """Sampling temperature."""
    fallback: ExtractiveSummarizer = field(default_factory=ExtractiveSummarizer)
    """Used when the model fails."""

    def __post_init__(self) -> None:
        if self.max_input_chars < 1000:
            raise ValueError(f"max_input_chars must be >= 1000, got {self.max_input_chars}")
        # ChatClient validates the URL, model and timeout.
        self._client = ChatClient(self.base_url, self.model, api_key=self.api_key, timeout=self.timeout)
        self._lock = threading.Lock()
        self.calls = 0
        self.fallbacks = 0
        self.last_error: str | None = None

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    def page_content(self, text: str, goal: str) -> str:
        if len(text) <= self.max_input_chars:
            return text
        return extract(text, goal, budget=self.max_input_chars, summary_chars=0).evidence

    def request(self, prompt: str) -> str:
        """Send one user message; the answer's text. Raises :class:`SummaryError`."""
        try:
            return self._client.complete(prompt, temperature=self.temperature, max_tokens=self.max_tokens)
        except ChatError as exc:
            raise SummaryError(str(exc)) from None

    def __call__(self, *, url: str, title: str, text: str, lead: str, goal: str) -> Focused:
        with self._lock:
            self.calls += 1
        prompt = PROMPT.format(content=f"# {title}\n\n{self.page_content(text, goal)}", goal=goal)
        try:
            evidence, summary = parse_answer(self.request(prompt))
        except SummaryError as exc:
            with self._lock:
                self.fallbacks += 1
                self.last_error = str(exc)
            result = self.fallback(url=url, title=title, text=text, lead=lead, goal=goal)
            mark = FALLBACK_MARK.format(reason=exc)
            return Focused(evidence=result.evidence, summary=f"{mark} {result.summary}".strip())
        return Focused(evidence=evidence, summary=summary)
