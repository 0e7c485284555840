"""The Tool protocol; it lives in :mod:`envs.tools.base` (this path keeps working)."""

from envs.tools.base import Tool, ToolResult, tool_schema

__all__ = ["Tool", "ToolResult", "tool_schema"]
