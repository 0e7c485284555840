"""The simulator's tools as an MCP server (official ``mcp`` SDK, optional extra ``mcp``).

``websailor serve mcp --wiki DIR`` exposes ``search``, ``visit`` and, when the bubblewrap
sandbox works here, ``python``: the tool objects of :mod:`envs.tools`, so every MCP host
sees the environments' argument schemas, descriptions and output text unchanged. A call
whose arguments are wrong gets the tool's own message as a tool error (``isError``), as the
environment would give it; the server keeps serving.

Transports: stdio (an MCP host starts the command) and streamable HTTP on 127.0.0.1 by
default, stateless (no session is kept: the tools hold no state), with ``GET /health``,
a request-body cap and a bound on tool calls running at once; each call has a deadline.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Literal

from envs.servers.limits import ServerLimits

MCP_MISSING = "the MCP server needs the official MCP SDK: pip install 'websailor-gym[mcp]'"


def require_mcp() -> None:
    try:
        import mcp  # noqa: F401
        from mcp.server.lowlevel import Server  # noqa: F401  (mcp >= 2)
    except ImportError:
        raise ImportError(MCP_MISSING) from None


@dataclass
class ToolHost:
    """The tools over one simulator, with a deadline per call and a bound on calls at once."""

    tools: dict[str, Any]
    limits: ServerLimits

    def __post_init__(self) -> None:
        import threading

        from envs.deadline import DeadlineRunner

        self._runner = DeadlineRunner(self.limits.max_abandoned_calls, name="mcp-tool")
        self._slots = threading.BoundedSemaphore(self.limits.max_concurrent)

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """``(text, is_error)`` of tool ``name`` on ``arguments``; never raises."""
        from envs.deadline import ToolBusy, ToolTimeout

        tool = self.tools.get(name)
        if tool is None:
            return f"Error: there is no tool named {str(name)[:100]!r}. Available tools: {', '.join(self.tools)}.", True
        if not isinstance(arguments, dict):
            return f"Error: {name} takes a JSON object of arguments, got {type(arguments).__name__}.", True
        size = len(json.dumps(arguments, ensure_ascii=False))
        if size > self.limits.max_request_bytes:
            return (f"Error: the arguments are {size} characters; at most {self.limits.max_request_bytes} "
                    "are accepted. Send a smaller request."), True
        if not self._slots.acquire(timeout=self.limits.call_timeout_s):
            return "Error: the server is busy (too many tool calls at once); try again shortly.", True
        try:
            result = self._runner.run(lambda: tool(dict(arguments)), self.limits.call_timeout_s)
        except ToolTimeout:
            return (f"Error: the {name} tool did not answer within {self.limits.call_timeout_s:g} s; "
                    "try a smaller request."), True
        except ToolBusy:
            return f"Error: the {name} tool is not answering (earlier calls still run past their deadline).", True
        except Exception as exc:  # a failing tool is the caller's error message, not a dead server
            return f"Error: the {name} tool failed ({type(exc).__name__}: {str(exc)[:300]}).", True
        finally:
            self._slots.release()
        return result.text, not result.ok

    def close(self) -> None:
        self._runner.close()


def simulator_tools(wiki_dir: str, python: Literal["auto", "on", "off"] = "off",
                    retriever: Literal["bm25", "dense", "hybrid"] = "bm25") -> tuple[dict[str, Any], Any]:
    """``({name: tool}, release)``: search and visit over the simulator in ``wiki_dir``, and python
    only when asked for (``on``: fail when the sandbox cannot run; ``auto``: only when it can). The
    python tool runs code for anyone who reaches the server, so it is off by default."""
    from envs.tools import build_tools
    from envs.wikisim import SHARED_SIMS

    names = ["search", "visit"]
    if python != "off":
        from envs.sandbox import SandboxUnavailableError
        from envs.tools.python import PythonTool

        try:
            PythonTool().check_available()
            names.append("python")
        except SandboxUnavailableError as exc:
            if python == "on":
                raise ValueError(f"python=on but the sandbox cannot run here: {exc}") from None
            print(f"websailor serve mcp: python tool off ({exc})", file=sys.stderr)
    sim, release = SHARED_SIMS.acquire(wiki_dir, retriever)
    tools, _ = build_tools(names, sim=sim)
    return {t.name: t for t in tools}, release


def build_server(host: ToolHost, name: str = "websailor-wikisim") -> Any:
    """A low-level MCP ``Server`` listing ``host``'s tools with their own JSON schemas."""
    require_mcp()
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server

    listed = [types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
              for t in host.tools.values()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> Any:
        text, is_error = await anyio.to_thread.run_sync(host.call, params.name, params.arguments or {})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("websailor-gym")
    except PackageNotFoundError:  # a source checkout that was never installed
        ours = "0+unknown"
    return Server(name, version=ours, on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions="Offline Wikipedia simulator: search, then visit pages with a goal.")


async def serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(server: Any, host: ToolHost, bind: str) -> Any:
    """The streamable-HTTP app (stateless) at ``/mcp``, plus ``GET /health``."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def health(request: Any) -> Any:
        return JSONResponse({"status": "ok", "tools": list(host.tools)})

    return server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                      max_request_body_size=host.limits.max_request_bytes, host=bind,
                                      custom_starlette_routes=[Route("/health", health, methods=["GET"])])
