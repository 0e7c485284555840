"""``search`` and ``google_scholar``: several queries at once, the top results of each.

One schema and one description per tool, shared by both environments, so a policy sees one
system prompt in both; two backends: :class:`SearchTool` over the simulator
(``sim.search(queries, k)``) and :class:`LiveSearchTool` over the managed live web
(:class:`envs.live.manager.LiveWeb`, which also serves ``google_scholar``). The observation
format is :func:`envs.formatting.format_search_batch` in both; ``data`` holds the hits
(``{"queries": [{"query", "ok", "hits": [{"title", "url"}]}]}``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from envs.arguments import ArgumentError, string_list
from envs.formatting import format_search, format_search_batch
from envs.tools.base import ToolResult

if TYPE_CHECKING:
    from envs.live.manager import LiveWeb
    from envs.live.stats import Outcome

SEPARATOR = "\n=======\n"
MAX_QUERIES = 10
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


def _field(hit: Any, name: str) -> str:
    value = hit.get(name) if isinstance(hit, dict) else getattr(hit, name, "")
    return str(value or "")


def search_data(queries: list[str], results: list[list[Any] | None]) -> dict[str, Any]:
    """The structured hits of one call (``None`` results: that query failed)."""
    return {"queries": [{"query": q, "ok": hits is not None,
                         "hits": [{"title": _field(h, "title"), "url": _field(h, "url")} for h in hits or []]}
                        for q, hits in zip(queries, results)]}


def _queries(arguments: Any, tool: str, max_items: int = MAX_QUERIES) -> list[str]:
    if not isinstance(arguments, dict):
        raise ArgumentError(f'Error: {tool} takes a JSON object of arguments, e.g. {{"query": ["..."]}}')
    return string_list(arguments, "query", tool=tool, aliases=("queries",), max_items=max_items, max_chars=500)


class SearchTool:
    """``search`` over the simulator: top ``k`` hits for each query in one call."""

    name = "search"
    description = SEARCH_DESCRIPTION
    parameters = SEARCH_PARAMETERS

    def __init__(self, sim: Any, k: int = 10, max_queries: int = MAX_QUERIES):
        if k < 1 or max_queries < 1:
            raise ValueError(f"expected k >= 1 and max_queries >= 1, got {k} and {max_queries}")
        self.sim, self.k, self.max_queries = sim, k, max_queries

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        try:
            queries = _queries(arguments, self.name, self.max_queries)
        except ArgumentError as exc:
            return ToolResult(str(exc), ok=False, metadata={"error": "bad_arguments"})
        results = self.sim.search(queries, k=self.k)
        return ToolResult(format_search_batch(queries, results),
                          metadata={"queries": len(queries), "hits": sum(len(r) for r in results)},
                          data=search_data(queries, results))


class LiveSearchTool:
    """``search`` (web) or ``google_scholar`` over the live web: never raises; a query whose
    sources all fail gets a message saying why, and the call ``ok=False``."""

    parameters = SEARCH_PARAMETERS

    def __init__(self, web: "LiveWeb", scholar: bool = False):
        self.web, self.scholar = web, scholar
        self.name = "google_scholar" if scholar else "search"
        self.description = SCHOLAR_DESCRIPTION if scholar else SEARCH_DESCRIPTION

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        from envs.tools.live_common import live_metadata, scrubbed_result

        start = time.time()
        try:
            queries = _queries(arguments, self.name)
        except ArgumentError as exc:
            self.web.stats.call(self.name, False, False, 0.0)
            return ToolResult(str(exc), ok=False, metadata={"tool": self.name, "error": "bad_arguments"})
        outcomes = [self.web.search(q, scholar=self.scholar) for q in queries]
        ok = all(o.ok for o in outcomes)
        if ok:
            text = format_search_batch(queries, [o.value for o in outcomes])
        else:
            text = SEPARATOR.join(format_search(q, o.value) if o.ok else self._error(q, o)
                                  for q, o in zip(queries, outcomes))
        latency = time.time() - start
        self.web.stats.call(self.name, ok, not ok, latency)
        return scrubbed_result(text, ok, live_metadata(self.name, outcomes, latency, []),
                               search_data(queries, [o.value if o.ok else None for o in outcomes]))

    def _error(self, query: str, outcome: "Outcome") -> str:
        return (f"The search for '{query}' failed: no search source could answer ({outcome.reasons()}). "
                "Try again later, or rephrase the query.")


class ScholarTool(LiveSearchTool):
    """``google_scholar``: :class:`LiveSearchTool` over the scholar sources (live web only)."""

    def __init__(self, web: "LiveWeb"):
        super().__init__(web, scholar=True)
