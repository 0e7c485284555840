"""``websailor/WikiSim-v0``: the research environment over the offline Wikipedia simulator.

``gym.make("websailor/WikiSim-v0", wiki_dir=DIR, tasks=PATH_OR_LIST)`` builds a
:class:`envs.env.ResearchEnv` whose tools search and read a built simulator directory
(``websailor wiki build``). ``tools=None`` gives the default set ``search``, ``visit``,
``python``; ``tools`` may also list names (``["search", "visit"]``), :class:`Tool`
objects, or both.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from envs.arguments import ArgumentError, string_arg, string_list
from envs.env import ResearchEnv
from envs.formatting import format_search_batch
from envs.tool import Tool, ToolResult

DEFAULT_TOOLS = ("search", "visit", "python")
VISIT_SEPARATOR = "\n=======\n"


class SearchTool:
    """Batched search over the simulator: top ``k`` hits for each query in one call."""

    name = "search"
    description = ("Performs batched web searches: supply an array 'query'; the tool retrieves "
                   "the top 10 results for each query in one call.")
    parameters = {
        "type": "object",
        "properties": {
            "query": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Array of query strings. Include multiple complementary search queries in a single call.",
            },
        },
        "required": ["query"],
    }

    def __init__(self, sim: Any, k: int = 10, max_queries: int = 10):
        if k < 1 or max_queries < 1:
            raise ValueError(f"expected k >= 1 and max_queries >= 1, got {k} and {max_queries}")
        self.sim, self.k, self.max_queries = sim, k, max_queries

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        try:
            queries = string_list(arguments, "query", tool=self.name, aliases=("queries",),
                                  max_items=self.max_queries, max_chars=500)
        except ArgumentError as exc:
            return ToolResult(str(exc), ok=False)
        results = self.sim.search(queries, k=self.k)
        return ToolResult(format_search_batch(queries, results),
                          metadata={"queries": len(queries), "hits": sum(len(r) for r in results)})


class VisitTool:
    """Reads simulator pages by URL, focused on a goal (evidence and summary per page)."""

    name = "visit"
    description = "Visit webpage(s) and return the summary of the content."
    parameters = {
        "type": "object",
        "properties": {
            "url": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The URL(s) of the webpage(s) to visit. Can be a single URL or an array of URLs.",
            },
            "goal": {"type": "string", "description": "The specific information goal for visiting webpage(s)."},
        },
        "required": ["url", "goal"],
    }

    def __init__(self, sim: Any, max_urls: int = 5):
        if max_urls < 1:
            raise ValueError(f"expected max_urls >= 1, got {max_urls}")
        self.sim, self.max_urls = sim, max_urls

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        example = {"url": ["https://en.wikipedia.org/wiki/..."], "goal": "..."}
        try:
            urls = string_list(arguments, "url", tool=self.name, aliases=("urls",), max_items=self.max_urls,
                               max_chars=2000, example=example)
            goal = string_arg(arguments, "goal", tool=self.name, example=example)
        except ArgumentError as exc:
            return ToolResult(str(exc), ok=False)
        pages = [self.sim.visit(url, goal) for url in urls]
        return ToolResult(VISIT_SEPARATOR.join(pages), metadata={"urls": len(urls)})


def build_tools(sim: Any, tools: Sequence[str | Tool] | None) -> tuple[list[Tool], list[Any]]:
    """The tool objects for ``tools`` (names or objects) over ``sim``, and those built here
    (the environment closes them)."""
    names = DEFAULT_TOOLS if tools is None else tools
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise ValueError(f"tools must be None or a list of tool names and Tool objects, got {type(tools).__name__}")
    built: list[Tool] = []
    owned: list[Any] = []
    for item in names:
        if not isinstance(item, str):
            built.append(item)
            continue
        if item == "search":
            tool: Tool = SearchTool(sim)
        elif item == "visit":
            tool = VisitTool(sim)
        elif item == "python":
            from envs.tools.python import PythonTool  # the sandbox module is only needed when asked for

            tool = PythonTool()
        else:
            raise ValueError(f"unknown tool name {item!r}; expected one of {list(DEFAULT_TOOLS)} or a Tool object")
        built.append(tool)
        owned.append(tool)
    return built, owned


def make_wikisim_env(wiki_dir: str | os.PathLike, tasks: str | os.PathLike | Sequence[dict],
                     tools: Sequence[str | Tool] | None = None, **kwargs: Any) -> ResearchEnv:
    """The research environment over the simulator in ``wiki_dir``.

    Other keyword arguments go to :class:`envs.env.ResearchEnv` (``max_tool_calls``,
    ``max_context_tokens``, ``tokenizer``, ``reward_weights``, ``judge``, ...).
    """
    from wiki_sim import WikiSim  # Whoosh is imported only when an environment is made

    if wiki_dir is None:
        raise ValueError("wiki_dir is required: the simulator directory built by `websailor wiki build`")
    sim = WikiSim(wiki_dir)
    try:
        tool_objects, owned = build_tools(sim, tools)
        env = ResearchEnv(tool_objects, tasks, **kwargs)
    except BaseException:
        _close(sim)
        raise
    for obj in [*owned, sim]:
        if callable(getattr(obj, "close", None)):
            env.add_closer(obj.close)
    return env


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()
