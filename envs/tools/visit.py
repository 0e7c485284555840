"""``visit``: read pages and return goal-focused evidence and a summary of each.

One schema and description, shared by both environments; two backends: :class:`VisitTool`
over the simulator (``sim.visit(url, goal)``) and :class:`LiveVisitTool` over the managed
live web (read by the reader chain, under the network policy; summarized by the model
summarizer or extractively). ``data`` lists the pages: ``{"pages": [{"url", "ok"}]}``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from envs.arguments import ArgumentError, string_arg, string_list
from envs.tools.base import ToolResult

if TYPE_CHECKING:
    from envs.live.manager import LiveWeb
    from envs.live.stats import Outcome

SEPARATOR = "\n=======\n"
MAX_URLS = 5
VISIT_DESCRIPTION = "Visit webpage(s) and return the summary of the content."
VISIT_PARAMETERS = {
    "type": "object",
    "properties": {
        "url": {"type": "array", "items": {"type": "string"},
                "description": "The URL(s) of the webpage(s) to visit. Can be a single URL or an array of URLs."},
        "goal": {"type": "string", "description": "The specific information goal for visiting webpage(s)."},
    },
    "required": ["url", "goal"],
}
_EXAMPLE = {"url": ["https://en.wikipedia.org/wiki/..."], "goal": "..."}


def _arguments(arguments: Any, max_urls: int) -> tuple[list[str], str]:
    if not isinstance(arguments, dict):
        raise ArgumentError('Error: visit takes a JSON object of arguments, e.g. {"url": ["..."], "goal": "..."}')
    urls = string_list(arguments, "url", tool="visit", aliases=("urls",), max_items=max_urls, max_chars=2000,
                       example=_EXAMPLE)
    goal = string_arg(arguments, "goal", tool="visit", example=_EXAMPLE)
    return urls, goal


_ADVICE = {
    "blocked": "Only public web pages can be visited; find the information on another page.",
    "too_large": "The page is too large to read; find the information on a smaller page.",
    "unreachable": "The site's name does not resolve; check the URL, or find the information on another page.",
}


def _advice(read: "Outcome") -> str:
    """What to do next, by the kind of failure (retrying helps only a transient one)."""
    kinds = {e.kind for e in read.errors}
    if len(kinds) == 1 and next(iter(kinds)) in _ADVICE:
        return _ADVICE[next(iter(kinds))]
    return "Try again later, or find the information on another page."


class VisitTool:
    """``visit`` over the simulator: evidence and summary per page, focused on the goal."""

    name = "visit"
    description = VISIT_DESCRIPTION
    parameters = VISIT_PARAMETERS

    def __init__(self, sim: Any, max_urls: int = MAX_URLS):
        if max_urls < 1:
            raise ValueError(f"expected max_urls >= 1, got {max_urls}")
        self.sim, self.max_urls = sim, max_urls

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        try:
            urls, goal = _arguments(arguments, self.max_urls)
        except ArgumentError as exc:
            return ToolResult(str(exc), ok=False, metadata={"error": "bad_arguments"})
        pages = [self.sim.visit(url, goal) for url in urls]
        return ToolResult(SEPARATOR.join(pages), metadata={"urls": len(urls)},
                          data={"pages": [{"url": url, "ok": True} for url in urls]})


class LiveVisitTool:
    """``visit`` over the live web: never raises; a page no reader could read gets a message
    saying why (a refused internal address, a page over the size cap, ...), ``ok=False``."""

    name = "visit"
    description = VISIT_DESCRIPTION
    parameters = VISIT_PARAMETERS

    def __init__(self, web: "LiveWeb", max_urls: int = MAX_URLS):
        self.web, self.max_urls = web, max_urls

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        from envs.tools.live_common import live_metadata, scrubbed_result

        start = time.time()
        try:
            urls, goal = _arguments(arguments, self.max_urls)
        except ArgumentError as exc:
            self.web.stats.call(self.name, False, False, 0.0)
            return ToolResult(str(exc), ok=False, metadata={"tool": self.name, "error": "bad_arguments"})
        goal = goal.strip()
        parts, reads, summaries, degraded = [], [], [], []
        for url in urls:
            text, read, summary, reason = self._visit(url, goal)
            parts.append(text)
            reads.append(read)
            if summary is not None:
                summaries.append(summary)
            if reason:
                degraded.append(reason)
        ok = all(o.ok for o in reads)
        latency = time.time() - start
        self.web.stats.call(self.name, ok, bool(degraded) or not ok, latency)
        metadata = live_metadata(self.name, reads, latency, degraded)
        metadata["retries"] += sum(o.retries for o in summaries)
        metadata["summarizer"] = "model" if summaries and all(o.ok for o in summaries) else "extractive"
        metadata["summary_cache_hits"] = sum(o.ok and o.cache_hit for o in summaries)
        metadata["errors"] += [str(e) for o in summaries for e in o.errors]
        data = {"pages": [{"url": url, "ok": read.ok} for url, read in zip(urls, reads)]}
        return scrubbed_result(SEPARATOR.join(parts), ok, metadata, data)

    def _visit(self, url: str, goal: str) -> tuple[str, "Outcome", "Outcome | None", str]:
        from envs.live.errors import NotFound
        from wiki_sim.focus import format_not_found, format_visit

        deadline = time.time() + self.web.config.deadline_s
        read = self.web.read(url, deadline)
        if not read.ok:
            if read.errors and all(isinstance(e, NotFound) for e in read.errors) and \
                    any(e.status in (404, 410) for e in read.errors):
                return format_not_found(url), read, None, ""
            return (f"The useful information in {url} for user goal {goal} could not be extracted: the page "
                    f"could not be read ({read.reasons()}). {_advice(read)}\n\n"), read, None, ""
        focused, summary = self.web.summarize(read.value, goal, deadline)
        reason = ""
        if summary is not None and not summary.ok:
            reason = f"summarizer failed for {url}; extractive evidence instead ({summary.reasons()})"
        return format_visit(url, goal, focused), read, summary, reason
