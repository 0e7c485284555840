"""``websailor serve mcp`` and ``websailor serve openenv``: one command per server.

Imports stay light here (the dispatcher imports this module to build its parser); the SDKs
are imported inside the run functions, and a missing one is one line saying what to install.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wiki_sim.common.errors import UserError


def _check_wiki_dir(wiki_dir: str) -> None:
    if not (Path(wiki_dir) / "build.json").is_file():
        raise UserError(f"{wiki_dir} is not a built simulator (no build.json); build one with `websailor wiki build`")


def _check_common(config) -> None:
    _check_wiki_dir(config.wiki_dir)
    if config.retriever not in ("bm25", "dense", "hybrid"):
        raise UserError(f"--retriever must be bm25, dense or hybrid, got {config.retriever!r}")
    if not 0 <= config.port <= 65535:
        raise UserError(f"--port must be in [0, 65535] (0: any free port), got {config.port}")
    config.limits()  # validates the bounds


@dataclass
class MCPConfig:
    """Serve the simulator's tools (search, visit, and python when asked for) to MCP hosts through
    the official MCP SDK, over stdio (an MCP host starts this command) or streamable HTTP (`/mcp`,
    with `GET /health`), with the environments' schemas and outputs."""

    wiki_dir: str = field(metadata={"flag": "--wiki"})
    """The simulator directory (built by `websailor wiki build`)."""
    transport: Literal["stdio", "http"] = "stdio"
    """stdio (for an MCP host that starts the command) or streamable HTTP."""
    host: str = "127.0.0.1"
    """HTTP: the address to listen on (another address exposes the server beyond this machine)."""
    port: int = 8765
    """HTTP: the port (0: any free port; the line on stderr says which)."""
    python: Literal["auto", "on", "off"] = "off"
    """The python tool (sandboxed code execution, no authentication: whoever reaches the server may run
    code): off, on (fail without the bubblewrap sandbox), auto (when the sandbox works here)."""
    max_concurrent: int = 8
    """Tool calls running at once; more wait, then get a busy error."""
    max_request_bytes: int = 1_000_000
    """Largest request body / tool arguments accepted."""
    call_timeout_s: float = 300.0
    """Deadline of one tool call, in seconds."""
    max_connections: int = 64
    """HTTP: connections open at once; one more gets 503 and is closed."""
    read_timeout_s: float = 30.0
    """HTTP: seconds a connection has to send a request's headers and body (else 408 and closed)."""
    retriever: Literal["bm25", "dense", "hybrid"] = "bm25"
    """The search tool's ranking: bm25, dense or hybrid (the last two need a simulator built with
    --retriever dense|hybrid)."""

    def __post_init__(self) -> None:
        _check_common(self)

    def limits(self):
        from envs.servers.limits import ServerLimits

        return ServerLimits(max_concurrent=self.max_concurrent, max_request_bytes=self.max_request_bytes,
                            call_timeout_s=self.call_timeout_s, max_connections=self.max_connections,
                            read_timeout_s=self.read_timeout_s)


def run_mcp(config: MCPConfig) -> int:
    from envs.servers.mcp_server import require_mcp

    try:
        require_mcp()
    except ImportError as exc:  # one line naming what to install, like any user error
        raise UserError(str(exc)) from None
    import anyio

    from envs.servers.mcp_server import ToolHost, build_server, http_app, serve_stdio, simulator_tools

    tools, release = simulator_tools(config.wiki_dir, config.python, config.retriever)
    host = ToolHost(tools, config.limits())
    server = build_server(host)
    try:
        if config.transport == "stdio":
            _stop_on_sigterm(lambda: (host.close(), release()))  # before the line that says it serves
            print(f"websailor serve mcp: serving {', '.join(tools)} over stdio", file=sys.stderr, flush=True)
            anyio.run(serve_stdio, server)
            return 0
        from envs.servers.http import is_loopback, serve

        if "python" in tools and not is_loopback(config.host):
            print(f"websailor serve mcp: warning: the python tool runs code for anyone who reaches {config.host}",
                  file=sys.stderr, flush=True)
        return serve(http_app(server, host, config.host), config.host, config.port, name="websailor serve mcp",
                     limits=config.limits())
    finally:
        host.close()
        release()


def _stop_on_sigterm(cleanup) -> None:
    """SIGTERM (or Ctrl-C) ends a stdio server at once with status 0: the SDK reads stdin in a
    thread that no cancellation reaches, and a stdio server holds no state to save (every reply
    is written whole before the next request is read)."""
    import os
    import signal

    def stop(signum, frame):
        try:
            cleanup()
            print("websailor serve mcp: stopped", file=sys.stderr, flush=True)
            sys.stdout.flush()
        finally:
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


@dataclass
class OpenEnvConfig:
    """Serve websailor/WikiSim-v0 as an OpenEnv environment server: each websocket session (/ws) gets
    its own environment and task; typed actions (tool call, answer, or a whole ReAct turn) and
    observations with reward and done; GET /health."""

    wiki_dir: str = field(metadata={"flag": "--wiki"})
    """The simulator directory (built by `websailor wiki build`)."""
    tasks: str
    """Task JSONL file ({"question", "answer"} per line); reset(task_index=i) picks one, reset(task={...})
    brings its own."""
    host: str = "127.0.0.1"
    """The address to listen on (another address exposes the server beyond this machine)."""
    port: int = 8000
    """The port (0: any free port; the line on stderr says which)."""
    tools: list[str] = field(default_factory=lambda: ["search", "visit"])
    """Tools of the environment (search, visit, python)."""
    max_tool_calls: int = 100
    """Tool-call budget per episode."""
    max_sessions: int = 16
    """Sessions (episodes) open at once; one more is refused with a capacity error."""
    session_idle_s: float = 900.0
    """A session with no message for this long is closed, freeing its slot."""
    max_request_bytes: int = 1_000_000
    """Largest request body or websocket message accepted."""
    tool_timeout_s: float = 300.0
    """Deadline of one tool call, in seconds."""
    max_connections: int = 64
    """Connections open at once, websockets included; one more gets 503 and is closed."""
    read_timeout_s: float = 30.0
    """Seconds a connection has to send a request's headers and body (else 408 and closed)."""
    retriever: Literal["bm25", "dense", "hybrid"] = "bm25"
    """The search tool's ranking: bm25, dense or hybrid (the last two need a simulator built with
    --retriever dense|hybrid)."""

    def __post_init__(self) -> None:
        from envs.tasks import check_task_file

        check_task_file(self.tasks)
        _check_common(self)
        if not self.session_idle_s > 0:
            raise ValueError(f"--session-idle-s must be > 0, got {self.session_idle_s}")
        if self.max_tool_calls < 1:
            raise ValueError(f"--max-tool-calls must be >= 1, got {self.max_tool_calls}")

    def limits(self):
        from envs.servers.limits import ServerLimits

        return ServerLimits(max_sessions=self.max_sessions, max_request_bytes=self.max_request_bytes,
                            call_timeout_s=self.tool_timeout_s, max_connections=self.max_connections,
                            read_timeout_s=self.read_timeout_s)


def run_openenv(config: OpenEnvConfig) -> int:
    try:
        from envs.servers.openenv_server import build_app
    except ImportError as exc:  # one line naming what to install, like any user error
        raise UserError(str(exc)) from None
    from envs.servers.http import serve

    app = build_app(config.max_sessions, config.session_idle_s, wiki_dir=config.wiki_dir, tasks=config.tasks,
                    tools=list(config.tools),
                    max_tool_calls=config.max_tool_calls, tool_timeout_s=config.tool_timeout_s,
                    **({"retriever": config.retriever} if config.retriever != "bm25" else {}))
    return serve(app, config.host, config.port, name="websailor serve openenv", limits=config.limits())
