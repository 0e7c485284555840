"""`websailor serve mcp`: the simulator's tools through the official MCP SDK, driven by the SDK's
own client over stdio and over streamable HTTP on 127.0.0.1 (real server processes)."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from envs.tools import build_tools  # noqa: E402
from tests.envs.server_support import ROOT, ServerProcess  # noqa: E402

PAGE = "https://en.wikipedia.org/wiki/Paris"


@pytest.fixture(scope="module")
def direct(default_wiki):
    """The environments' own tools over the same simulator, for the expected outputs."""
    from wiki_sim import WikiSim

    sim = WikiSim(default_wiki)
    tools, _ = build_tools(["search", "visit"], sim=sim)
    yield {t.name: t for t in tools}
    sim.close()


@pytest.fixture(scope="module")
def http_server(default_wiki):
    proc = ServerProcess("mcp", "--wiki", str(default_wiki), "--transport", "http", "--max-request-bytes", "100000")
    yield proc
    assert proc.stop() == 0, proc.output()
    assert "stopped" in proc.output()


async def _exercise(client: Client, direct: dict, http: bool) -> list[str]:
    listed = (await client.list_tools()).tools
    by_name = {t.name: t for t in listed}
    for name in ("search", "visit"):
        assert by_name[name].input_schema == direct[name].parameters
        assert by_name[name].description == direct[name].description
    search_args = {"query": ["capital of France", "Seine river"]}
    found = await client.call_tool("search", search_args)
    assert not found.is_error and found.content[0].text == direct["search"](search_args).text
    visit_args = {"url": [PAGE], "goal": "what river flows through it"}
    page = await client.call_tool("visit", visit_args)
    assert not page.is_error and page.content[0].text == direct["visit"](visit_args).text
    bad = await client.call_tool("visit", {"url": 3})  # a bad argument: the tool's message, as an error
    assert bad.is_error and bad.content[0].text == direct["visit"]({"url": 3}).text
    unknown = await client.call_tool("fetch", {})
    assert unknown.is_error and "no tool named 'fetch'" in unknown.content[0].text
    if http:  # over the request cap: refused whole, with an error response
        with pytest.raises(MCPError):
            await client.call_tool("search", {"query": ["x" * 200_000]})
    else:  # over the arguments cap
        huge = await client.call_tool("search", {"query": ["x" * 2_000_000]})
        assert huge.is_error and "at most 1000000" in huge.content[0].text
    again = await client.call_tool("search", {"query": ["Paris"]})  # still serving
    assert not again.is_error and "Paris" in again.content[0].text
    if "python" in by_name:
        ran = await client.call_tool("python", {"code": "print(6 * 7)"})
        assert not ran.is_error and "42" in ran.content[0].text
    return sorted(by_name)


def _sandbox_works() -> bool:
    from envs.sandbox import SandboxUnavailableError
    from envs.tools.python import PythonTool

    try:
        PythonTool().check_available()
        return True
    except SandboxUnavailableError:
        return False


def test_stdio(default_wiki, direct):
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                   args=["-m", "websailor.cli", "serve", "mcp", "--wiki", str(default_wiki),
                                         "--python", "auto"],
                                   env={"PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                                        "OMP_NUM_THREADS": "1"})

    async def run():
        async with Client(stdio_client(params)) as client:
            return await _exercise(client, direct, http=False)

    names = anyio.run(run)
    assert names == (["python", "search", "visit"] if _sandbox_works() else ["search", "visit"])


def test_streamable_http_on_loopback(http_server, direct):
    assert http_server.url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(http_server.url + "/health", timeout=30) as response:
        assert json.loads(response.read())["status"] == "ok"

    async def run():
        async with Client(http_server.url + "/mcp") as client:
            return await _exercise(client, direct, http=True)

    assert anyio.run(run) == ["search", "visit"]  # the python tool is off unless asked for
    request = urllib.request.Request(http_server.url + "/mcp", data=b"{" + b" " * 200_000 + b"}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    with urllib.request.urlopen(http_server.url + "/health", timeout=30) as response:
        assert response.status == 200


def test_stdio_stops_cleanly_on_sigterm(default_wiki):
    import signal
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "websailor.cli", "serve", "mcp", "--wiki", str(default_wiki),
                             "--python", "off"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    try:
        assert "serving search, visit over stdio" in proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
