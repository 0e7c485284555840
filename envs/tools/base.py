"""The Tool protocol every tool in every environment implements.

An environment is given a list of tools; what differs between the offline simulator and
the live web is only the backend behind them (:mod:`envs.tools.registry` builds either set
by name). A tool validates its own arguments and reports problems as a :class:`ToolResult`
with ``ok=False`` and a message telling the model how to call it correctly; an exception
escaping a tool is caught by the environment all the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class ToolResult:
    """What one tool call returns."""

    text: str
    """The observation content, placed inside ``<tool_response>`` by the environment."""
    ok: bool = True
    """False when the call failed (bad arguments, every source down, timeout, ...)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Per-call metrics for ``info`` (source used, cache hit, retries, degraded, ...)."""
    error: str = ""
    """Why the call failed, in one line, for ``info["tool_error"]`` (when ``ok`` is False;
    empty: the environment uses the first line of ``text``)."""
    data: dict[str, Any] = field(default_factory=dict)
    """What the call found, structured, for ``info["tool_data"]`` (so rollouts and reports
    need not parse the text): search gives ``{"queries": [{"query", "ok", "hits": [{"title",
    "url"}]}]}``, visit ``{"pages": [{"url", "ok"}]}``, python ``{"status", "exit_code", "timed_out"}``."""


@runtime_checkable
class Tool(Protocol):
    """A callable tool with a name and a JSON-schema description of its arguments."""

    name: str
    """The name the model calls it by (``search``, ``visit``, ``python``, ...)."""
    description: str
    """One or two sentences for the system prompt."""
    parameters: dict[str, Any]
    """JSON schema (``{"type": "object", "properties": ..., "required": [...]}``)."""

    def __call__(self, arguments: dict[str, Any]) -> ToolResult: ...


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The tool as it is listed inside ``<tools>`` in the system prompt."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
