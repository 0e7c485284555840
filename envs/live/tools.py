"""The live tools ``search``, ``google_scholar`` and ``visit``: the simulator's names,
arguments and output formats, over :class:`~envs.live.manager.LiveWeb`.

A tool never raises: bad arguments, and sources that all fail, become an observation that
says what went wrong and what to do, with ``ok=False``. ``metadata`` carries the per-call
metrics (``source``, ``cache_hit``, ``retries``, ``latency_s``, ``degraded``, ...) for ``info``.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from envs.arguments import ArgumentError, string_arg, string_list
from envs.formatting import format_search, format_search_batch
from envs.live.errors import NotFound
from envs.live.manager import LiveWeb
from envs.live.redact import scrub
from envs.live.stats import Outcome
from envs.tool import ToolResult
from wiki_sim.focus import format_not_found, format_visit

SEPARATOR = "\n=======\n"
MAX_QUERIES = 10
MAX_URLS = 5
# The simulator's tools (envs.wikisim) describe themselves in these same words and schemas,
# so a policy sees one system prompt in both environments.
SEARCH_DESCRIPTION = ("Performs batched web searches: supply an array 'query'; the tool retrieves "
                      "the top 10 results for each query in one call.")
SCHOLAR_DESCRIPTION = ("Leverage Google Scholar to retrieve relevant information from academic publications. "
                       "Accepts multiple queries: supply an array 'query'; the tool retrieves the top 10 results "
                       "for each query in one call.")
SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "array", "items": {"type": "string"},
                             "description": "Array of query strings. Include multiple complementary search queries "
                                            "in a single call."}},
    "required": ["query"],
}
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


def _metadata(tool: str, outcomes: list[Outcome], latency_s: float, degraded: list[str]) -> dict[str, Any]:
    sources = [o.source for o in outcomes if o.source]
    failed = [o for o in outcomes if not o.ok]
    degraded = [f"every source failed: {o.reasons()}" for o in failed] + degraded
    return {
        "tool": tool,
        "source": Counter(sources).most_common(1)[0][0] if sources else None,
        "sources": sources,
        "cache_hit": bool(outcomes) and all(o.ok and o.cache_hit for o in outcomes),
        "cache_hits": sum(o.ok and o.cache_hit for o in outcomes),
        "retries": sum(o.retries for o in outcomes),
        "fallback": any(o.ok and o.errors for o in outcomes),
        "latency_s": latency_s,
        "degraded": bool(degraded),
        "degraded_reasons": degraded,
        "items": len(outcomes),
        "failed_items": sum(not o.ok for o in outcomes),
        "errors": [str(e) for o in outcomes for e in o.errors],
    }


def _result(text: str, ok: bool, metadata: dict[str, Any]) -> ToolResult:
    """The tool's result, every API key (in every spelling) scrubbed from what the model and
    ``info`` see: a provider may echo a request back."""
    metadata = {k: ([scrub(x) for x in v] if isinstance(v, list) and v and isinstance(v[0], str) else v)
                for k, v in metadata.items()}
    error = "" if ok else scrub(metadata["degraded_reasons"][0] if metadata.get("degraded_reasons") else "")
    return ToolResult(scrub(text), ok=ok, metadata=metadata, error=error)


class _LiveTool:
    name: str
    description: str
    parameters: dict[str, Any]

    def __init__(self, web: LiveWeb):
        self.web = web

    def _fail(self, message: str) -> ToolResult:
        self.web.stats.call(self.name, False, False, 0.0)
        return ToolResult(message, ok=False, metadata={"tool": self.name, "error": "bad_arguments"})



class LiveSearchTool(_LiveTool):
    """``search`` (web) or ``google_scholar``: several queries at once, top results each."""

    def __init__(self, web: LiveWeb, scholar: bool = False):
        super().__init__(web)
        self.scholar = scholar
        self.name = "google_scholar" if scholar else "search"
        self.description = SCHOLAR_DESCRIPTION if scholar else SEARCH_DESCRIPTION
        self.parameters = SEARCH_PARAMETERS

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        start = time.time()
        try:
            queries = string_list(arguments, "query", tool=self.name, aliases=("queries",),
                                  max_items=MAX_QUERIES, max_chars=500)
        except (ArgumentError, AttributeError) as exc:
            return self._fail(str(exc) if isinstance(exc, ArgumentError) else
                              f'Error: {self.name} takes a JSON object of arguments, e.g. {{"query": ["..."]}}')
        outcomes = [self.web.search(q, scholar=self.scholar) for q in queries]
        if all(o.ok for o in outcomes):
            text = format_search_batch(queries, [o.value for o in outcomes])
        else:
            text = SEPARATOR.join(format_search(q, o.value) if o.ok else self._error(q, o)
                                  for q, o in zip(queries, outcomes))
        ok = all(o.ok for o in outcomes)
        latency = time.time() - start
        self.web.stats.call(self.name, ok, not ok, latency)
        return _result(text, ok, _metadata(self.name, outcomes, latency, []))

    def _error(self, query: str, outcome: Outcome) -> str:
        return (f"The search for '{query}' failed: no search source could answer ({outcome.reasons()}). "
                "Try again later, or rephrase the query.")


class LiveVisitTool(_LiveTool):
    """``visit``: read pages and return goal-focused evidence and a summary of each."""

    name = "visit"
    description = VISIT_DESCRIPTION
    parameters = VISIT_PARAMETERS

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        start = time.time()
        example = {"url": ["https://en.wikipedia.org/wiki/..."], "goal": "..."}
        try:
            urls = string_list(arguments, "url", tool=self.name, aliases=("urls",), max_items=MAX_URLS,
                               max_chars=2000, example=example)
            goal = string_arg(arguments, "goal", tool=self.name, example=example)
        except (ArgumentError, AttributeError) as exc:
            return self._fail(str(exc) if isinstance(exc, ArgumentError) else
                              'Error: visit takes a JSON object of arguments, e.g. {"url": ["..."], "goal": "..."}')
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
        metadata = _metadata(self.name, reads, latency, degraded)
        metadata["retries"] += sum(o.retries for o in summaries)
        metadata["summarizer"] = "model" if summaries and not any(not o.ok for o in summaries) else "extractive"
        metadata["summary_cache_hits"] = sum(o.ok and o.cache_hit for o in summaries)
        metadata["errors"] += [str(e) for o in summaries for e in o.errors]
        return _result(SEPARATOR.join(parts), ok, metadata)

    def _visit(self, url: str, goal: str) -> tuple[str, Outcome, Outcome | None, str]:
        deadline = time.time() + self.web.config.deadline_s
        read = self.web.read(url, deadline)
        if not read.ok:
            if read.errors and all(isinstance(e, NotFound) for e in read.errors) and \
                    any(e.status in (404, 410) for e in read.errors):
                return format_not_found(url), read, None, ""
            return (f"The useful information in {url} for user goal {goal} could not be extracted: the page "
                    f"could not be read ({read.reasons()}). Try again later, or find the information on "
                    "another page.\n\n"), read, None, ""
        focused, summary = self.web.summarize(read.value, goal, deadline)
        reason = ""
        if summary is not None and not summary.ok:
            reason = f"summarizer failed for {url}; extractive evidence instead ({summary.reasons()})"
        return format_visit(url, goal, focused), read, summary, reason


class LiveTools:
    """Names -> tool factories over one :class:`LiveWeb`."""

    NAMES = ("search", "visit", "google_scholar", "python")

    @staticmethod
    def make(name: str, web: LiveWeb):
        if name == "search":
            return LiveSearchTool(web)
        if name == "google_scholar":
            return LiveSearchTool(web, scholar=True)
        if name == "visit":
            return LiveVisitTool(web)
        if name == "python":
            from envs.tools.python import PythonTool

            return PythonTool()
        raise ValueError(f"unknown live tool {name!r}; expected one of {list(LiveTools.NAMES)}")
