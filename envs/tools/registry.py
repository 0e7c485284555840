"""The one name-to-tool factory of both environments.

``build_tools(names, sim=..., web=..., defaults=...)`` turns tool names (and ready Tool
objects, passed through) into tools over the simulator (``sim``, a :class:`wiki_sim.WikiSim`)
or the managed live web (``web``, a :class:`envs.live.manager.LiveWeb`): the same names give
the same schemas in both. ``google_scholar`` exists on the live web only; ``python`` runs
in the sandbox whichever the environment.
"""

from __future__ import annotations

from typing import Any, Sequence

from envs.tools.base import Tool

TOOL_NAMES = ("search", "visit", "google_scholar", "python")
SIM_DEFAULT_TOOLS = ("search", "visit", "python")
LIVE_DEFAULT_TOOLS = ("search", "visit", "google_scholar", "python")


def make_tool(name: str, *, sim: Any = None, web: Any = None) -> Tool:
    """The tool called ``name`` over ``web`` when given, else over ``sim``."""
    if name == "python":
        from envs.tools.python import PythonTool  # the sandbox module is only needed when asked for

        return PythonTool()
    if name == "search":
        from envs.tools.search import LiveSearchTool, SearchTool

        return LiveSearchTool(web) if web is not None else SearchTool(sim)
    if name == "visit":
        from envs.tools.visit import LiveVisitTool, VisitTool

        return LiveVisitTool(web) if web is not None else VisitTool(sim)
    if name == "google_scholar":
        if web is None:
            raise ValueError("the google_scholar tool needs the live web; the simulator has search, visit and python")
        from envs.tools.search import ScholarTool

        return ScholarTool(web)
    raise ValueError(f"unknown tool name {name!r}; expected one of {list(TOOL_NAMES)} or a Tool object")


def build_tools(names: Sequence[str | Tool] | None, *, sim: Any = None, web: Any = None,
                defaults: Sequence[str] = SIM_DEFAULT_TOOLS) -> tuple[list[Tool], list[Any]]:
    """The tools for ``names`` (None: ``defaults``), and those built here (their owner, the
    environment, closes them)."""
    names = defaults if names is None else names
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise ValueError(f"tools must be None or a list of tool names and Tool objects, got {type(names).__name__}")
    built: list[Tool] = []
    owned: list[Any] = []
    for item in names:
        if isinstance(item, str):
            tool = make_tool(item, sim=sim, web=web)
            owned.append(tool)
        else:
            tool = item
        built.append(tool)
    return built, owned
