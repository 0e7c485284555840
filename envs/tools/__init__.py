"""Every tool of both environments, each with one schema and description.

- :mod:`envs.tools.base`: the :class:`Tool` protocol and :class:`ToolResult`;
- :mod:`envs.tools.search`: ``search`` and ``google_scholar`` (simulator and live backends);
- :mod:`envs.tools.visit`: ``visit`` (simulator and live backends);
- :mod:`envs.tools.python`: ``python`` in the bubblewrap sandbox;
- :mod:`envs.tools.registry`: the one name-to-tool factory (:func:`build_tools`).

The backends they call are :mod:`wiki_sim`, :mod:`envs.live` and :mod:`envs.sandbox`.
Nothing heavy is imported here.
"""

from envs.tools.base import Tool, ToolResult, tool_schema
from envs.tools.registry import LIVE_DEFAULT_TOOLS, SIM_DEFAULT_TOOLS, TOOL_NAMES, build_tools, make_tool

__all__ = ["Tool", "ToolResult", "tool_schema", "build_tools", "make_tool", "TOOL_NAMES", "SIM_DEFAULT_TOOLS",
           "LIVE_DEFAULT_TOOLS", "SearchTool", "LiveSearchTool", "ScholarTool", "VisitTool", "LiveVisitTool",
           "PythonTool"]


def __getattr__(name: str):
    if name in ("SearchTool", "LiveSearchTool", "ScholarTool"):
        from envs.tools import search

        return getattr(search, name)
    if name in ("VisitTool", "LiveVisitTool"):
        from envs.tools import visit

        return getattr(visit, name)
    if name == "PythonTool":
        from envs.tools.python import PythonTool

        return PythonTool
    raise AttributeError(f"module 'envs.tools' has no attribute {name!r}")
