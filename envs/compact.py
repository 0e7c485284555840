"""The compact setting of ``websailor/WikiSim-v0``: observations short enough for a small model on CPU.

``gym.make("websailor/WikiSim-v0", wiki_dir=..., tasks=..., compact=CompactConfig())`` (or
``compact=True``, or a mapping of the fields) gives the short system prompt
:data:`COMPACT_SYSTEM_PROMPT`, a search that returns the top ``search_k`` hits of at most
``max_queries`` queries with snippets cut to ``snippet_chars``, and a visit that reads one page, its evidence cut
to ``visit_chars``; same simulator, same output formats as the full tools. Arguments given to
``gym.make`` explicitly (``tools``, ``system_prompt``, ``max_tool_calls``, ...) win over the
setting. The main job plays every policy and records its gold trajectories in it, so SFT data and
evaluation see the same observations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from envs.formatting import format_search_batch
from envs.tools.base import ToolResult
from wiki_sim.focus import Focused, format_visit

MAX_GOAL_CHARS = 100
"""Characters of a compact visit's goal that are used and echoed."""

COMPACT_SYSTEM_PROMPT = (
    "You answer questions by searching and reading Wikipedia.\n<tools>\n"
    '{"name": "search", "arguments": {"query": ["..."]}}\n'
    '{"name": "visit", "arguments": {"url": ["..."], "goal": "..."}}\n'
    "</tools>\nEvery turn is <think>your reasoning</think> followed by exactly one of "
    "<tool_call>\n{\"name\": ..., \"arguments\": {...}}\n</tool_call> or <answer>the article's title</answer>."
)


@dataclass(frozen=True)
class CompactConfig:
    """The compact observations and budgets."""

    search_k: int = 3
    """Hits per search query (the main job's gold query finds the answer in the top 3 for 74% of
    description lookups and >99% of lead lookups on the default simulator)."""
    snippet_chars: int = 80
    """Characters of each hit's snippet."""
    max_queries: int = 1
    """Queries per search call that are run (the rest are ignored)."""
    visit_chars: int = 200
    """Characters of a visited page."""
    max_urls: int = 1
    """Pages per visit call that are read."""
    max_tool_calls: int = 2
    """Tool calls per episode."""
    max_format_errors: int = 2
    """Malformed turns in a row that end the episode (``format_error``)."""
    current_date: str = "2025-01-01"
    """The date the environment states."""
    system_prompt: str = COMPACT_SYSTEM_PROMPT
    """The system prompt."""

    def __post_init__(self) -> None:
        for name in ("search_k", "snippet_chars", "max_queries", "visit_chars", "max_urls", "max_tool_calls",
                     "max_format_errors"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"compact {name}: expected an integer >= 1, got {value!r}")
        if not isinstance(self.system_prompt, str) or not self.system_prompt.strip():
            raise ValueError(f"compact system_prompt: expected a non-empty string, got {self.system_prompt!r}")

    @classmethod
    def coerce(cls, value: "CompactConfig | Mapping[str, Any] | bool") -> "CompactConfig":
        """A config from ``True``, a mapping of its fields, or a config."""
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown:
                raise ValueError(f"compact: unknown fields {sorted(unknown)}; expected some of "
                                 f"{[f.name for f in fields(cls)]}")
            return cls(**value)
        raise ValueError(f"compact: expected True, a CompactConfig or a mapping of its fields, got {value!r}")

    def env_defaults(self) -> dict[str, Any]:
        """The :class:`envs.env.ResearchEnv` arguments this setting chooses."""
        return {"system_prompt": self.system_prompt, "current_date": self.current_date,
                "max_tool_calls": self.max_tool_calls, "max_format_errors": self.max_format_errors}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TopKSearch:
    """The simulator's batched search with ``k`` hits per query, snippets cut to ``snippet_chars``
    (same output format as the environment's ``search``)."""

    name = "search"
    description = "Performs batched web searches: supply an array 'query'; returns the top hits of each."
    parameters = {"type": "object", "properties": {"query": {"type": "array", "items": {"type": "string"}}},
                  "required": ["query"]}

    def __init__(self, sim: Any, k: int = 3, max_queries: int = 1, snippet_chars: int = 80):
        self.sim, self.k, self.max_queries, self.snippet_chars = sim, k, max_queries, snippet_chars

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        queries = arguments.get("query", arguments.get("queries"))
        if isinstance(queries, str):
            queries = [queries]
        if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
            return ToolResult('Error: search needs "query", a list of strings.', ok=False)
        queries = [q[:300] for q in queries[:self.max_queries]]
        results = [[{"title": h.title, "url": h.url, "snippet": h.snippet[:self.snippet_chars]} for h in hits]
                   for hits in self.sim.search(queries, k=self.k)]
        return ToolResult(format_search_batch(queries, results))


class ShortVisit:
    """The simulator's goal-focused page reading, cut to ``max_chars`` per page."""

    name = "visit"
    description = "Visit webpage(s) and return the evidence for the goal."
    parameters = {"type": "object", "properties": {"url": {"type": "array", "items": {"type": "string"}},
                                                   "goal": {"type": "string"}}, "required": ["url", "goal"]}

    def __init__(self, sim: Any, max_urls: int = 1, max_chars: int = 200):
        self.sim, self.max_urls, self.max_chars = sim, max_urls, max_chars

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        urls, goal = arguments.get("url"), arguments.get("goal")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls) \
                or not isinstance(goal, str):
            return ToolResult('Error: visit needs "url", a list of strings, and "goal", a string.', ok=False)
        pages = [self._page(url[:2000], goal[:MAX_GOAL_CHARS]) for url in urls[:self.max_urls]]
        return ToolResult("\n=======\n".join(pages))

    def _page(self, url: str, goal: str) -> str:
        """One page: the full visit's header, then its evidence cut to ``max_chars`` (the header, whose URL
        and goal can be long, does not eat the page's characters); a page not found: that text, cut."""
        found = self.sim.read(url, goal)
        if found is None:
            return self.sim.visit(url, goal)[:2 * self.max_chars]
        return format_visit(url, goal, Focused(found[1].evidence[:self.max_chars], ""), summary=False)


def compact_tools(sim: Any, config: CompactConfig) -> list[Any]:
    """The compact ``search`` and ``visit`` over ``sim``."""
    return [TopKSearch(sim, k=config.search_k, max_queries=config.max_queries, snippet_chars=config.snippet_chars),
            ShortVisit(sim, max_urls=config.max_urls, max_chars=config.visit_chars)]
