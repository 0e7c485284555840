"""Both servers (`websailor serve mcp --transport http`, `websailor serve openenv`) under the attacks
of a red team on loopback: foreign Host/Origin headers (HTTP and websocket), plain-text POSTs from a
web page, slow clients (headers or a body sent halfway), connection floods, chunked bodies over the
cap, a step after done; and OpenEnv's HTTP endpoints build no environment on the event loop."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.envs.server_support import ServerProcess

pytest.importorskip("mcp")
pytest.importorskip("openenv")

LIMITS = ("--read-timeout-s", "1", "--max-connections", "6", "--max-request-bytes", "100000")


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "tasks.jsonl"
    path.write_text(json.dumps({"id": "paris", "question": "Which city is the capital of France?",
                                "answer": "Paris"}) + "\n")
    return path


@pytest.fixture(scope="module", params=["mcp", "openenv"])
def server(request, default_wiki, task_file):
    if request.param == "mcp":
        proc = ServerProcess("mcp", "--wiki", str(default_wiki), "--transport", "http", *LIMITS)
    else:
        proc = ServerProcess("openenv", "--wiki", str(default_wiki), "--tasks", str(task_file), "--max-sessions", "2",
                             *LIMITS)
    proc.kind = request.param
    yield proc
    assert proc.stop() == 0, proc.output()


def _address(server) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname, parts.port


def _exchange(server, data: bytes, *, wait: float = 10.0) -> tuple[bytes, float]:
    """Send ``data`` on a new connection and read until the server closes it (or ``wait`` passes);
    the reply and the seconds it took."""
    start = time.monotonic()
    with socket.create_connection(_address(server), timeout=wait) as sock:
        sock.sendall(data)
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return reply, time.monotonic() - start


def _request(server, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, bytes]:
    host, port = _address(server)
    head = {"Host": f"{host}:{port}", "Connection": "close", **{k.replace("_", "-"): v for k, v in headers.items()}}
    if method == "POST":
        head.setdefault("Content-Length", str(len(body)))
    raw = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n"
    reply, _ = _exchange(server, raw.encode() + body)
    status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
    return status, reply.partition(b"\r\n\r\n")[2]


def _path(server) -> str:
    return "/mcp" if server.kind == "mcp" else "/ws"


def _websocket_handshake(server, origin: str | None) -> int:
    host, port = _address(server)
    extra = f"Origin: {origin}\r\n" if origin else ""
    raw = (f"GET {_path(server)} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n").encode()
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(raw)
        return int(sock.recv(4096).split(b" ", 2)[1])


MCP_INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()


def test_foreign_host_and_origin_are_refused(server):
    assert _request(server, "GET", "/health")[0] == 200
    host, port = _address(server)
    assert _request(server, "GET", "/health", Origin=f"http://localhost:{port}")[0] == 200  # its own origin
    assert _request(server, "GET", "/health", Host="evil.example")[0] == 421  # DNS rebinding
    assert _request(server, "POST", "/mcp", MCP_INIT, Content_Type="application/json",
                    Origin="http://evil.example")[0] == 403
    assert _request(server, "GET", "/health", Origin="null")[0] == 403
    if server.kind == "openenv":  # a websocket from a web page is refused before any session exists
        assert _websocket_handshake(server, "http://evil.example") == 403
        assert _websocket_handshake(server, None) == 101
    else:
        assert _websocket_handshake(server, "http://evil.example") == 403


def test_plain_text_posts_from_a_web_page_create_nothing(server):
    """A page can send text/plain POSTs anywhere without asking the browser first; 16 of them once
    made OpenEnv sessions without a connection and locked real clients out for 900 s."""
    create = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}).encode()
    for _ in range(20):
        status, _ = _request(server, "POST", "/mcp", create, Content_Type="text/plain")
        assert status == 415
    if server.kind != "openenv":
        return
    status, body = _request(server, "POST", "/mcp", create, Content_Type="application/json")
    assert status == 404 and b"/ws" in body  # no sessions without a connection, whoever asks
    from envs.servers.openenv_server import WikiSimAction, WikiSimClient

    async def play():
        async with WikiSimClient(base_url=server.url) as a, WikiSimClient(base_url=server.url) as b:
            for client in (a, b):  # both slots are free
                assert (await client.reset(task_index=0)).observation.question.startswith("Which city")
            end = await a.step(WikiSimAction(answer="Paris"))
            assert end.done and end.reward == 1.0
            late = await a.step(WikiSimAction(answer="Paris"))  # after done: refused, no second reward
            assert late.done and late.reward == 0.0 and late.observation.text.startswith("Error: the episode is over")

    asyncio.run(play())


def test_slow_clients_are_cut_off_at_the_read_deadline(server):
    host, port = _address(server)
    # headers that never end
    reply, took = _exchange(server, f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: 1".encode())
    assert reply.startswith(b"HTTP/1.1 408") and took < 5
    # a body sent halfway
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: 90000\r\n\r\n").encode()
    reply, took = _exchange(server, head + b"{" + b" " * 1000)
    assert reply.startswith(b"HTTP/1.1 408") and took < 5
    assert _request(server, "GET", "/health")[0] == 200


def _still_open(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK)) and False
    except BlockingIOError:
        return True
    except OSError:
        return False


def test_connections_are_capped_and_slow_ones_make_room(server):
    """A flood of idle connections holds at most the cap, and a fresh client still gets through:
    each new connection past the cap closes the one that has waited longest for its request."""
    held = [socket.create_connection(_address(server), timeout=10) for _ in range(20)]
    try:
        time.sleep(0.3)
        assert _request(server, "GET", "/health")[0] == 200
        time.sleep(0.2)
        assert sum(map(_still_open, held)) <= 6
        assert not _still_open(held[0]) and held[0].recv(100).startswith(b"HTTP/1.1 408")
    finally:
        for sock in held:
            sock.close()
    assert _request(server, "GET", "/health")[0] == 200


def test_an_oversized_chunked_body_gets_413(server):
    host, port = _address(server)
    chunk = b" " * 10_000
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(15)) + b"0\r\n\r\n"
    path = "/mcp" if server.kind == "mcp" else "/step"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    reply, _ = _exchange(server, head + body)
    assert reply.startswith(b"HTTP/1.1 413") and b"smaller request" in reply
    assert _request(server, "GET", "/health")[0] == 200


def test_openenv_http_endpoints_build_no_environment_and_read_the_tasks_once(default_wiki, task_file, monkeypatch):
    from fastapi.testclient import TestClient

    import envs.servers.openenv_server as server_module
    import envs.tasks as tasks_module

    built, reads = [], []
    real_episode, real_read = server_module.ToolEpisode, tasks_module.read_jsonl_tasks

    class Counted(real_episode):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    def counted_read(path):
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(server_module, "ToolEpisode", Counted)
    monkeypatch.setattr(tasks_module, "read_jsonl_tasks", counted_read)
    app = server_module.build_app(2, wiki_dir=str(default_wiki), tasks=str(task_file), tools=["search"])
    assert len(built) == 1 and len(reads) == 1  # the start-up check
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for _ in range(5):
            assert client.get("/state").status_code == 200
            assert client.get("/metadata").status_code == 200
        assert len(built) == 1
        first = client.post("/reset", json={"task_index": 0})
        assert first.status_code == 200 and "capital of France" in first.text
    assert len(reads) == 1  # every environment shares the tasks read at start


def test_a_full_server_with_no_slow_connection_refuses_with_503(default_wiki, task_file):
    """Every connection is being served (two websocket sessions): one more gets 503 at once, and the
    sessions go on."""
    from envs.servers.openenv_server import WikiSimAction, WikiSimClient

    proc = ServerProcess("openenv", "--wiki", str(default_wiki), "--tasks", str(task_file), "--max-sessions", "2",
                         "--max-connections", "2")
    proc.kind = "openenv"
    try:
        async def run():
            async with WikiSimClient(base_url=proc.url) as a, WikiSimClient(base_url=proc.url) as b:
                await a.reset(task_index=0)
                await b.reset(task_index=0)
                reply, took = await asyncio.to_thread(_exchange, proc, b"GET /health HTTP/1.1\r\n\r\n")
                assert reply.startswith(b"HTTP/1.1 503") and b"too many connections" in reply and took < 2
                assert (await a.step(WikiSimAction(answer="Paris"))).reward == 1.0

        asyncio.run(run())
        time.sleep(0.3)
        assert _request(proc, "GET", "/health")[0] == 200
    finally:
        assert proc.stop() == 0, proc.output()
