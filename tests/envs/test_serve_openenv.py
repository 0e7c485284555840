"""`websailor serve openenv`: a real server process on 127.0.0.1 driven by OpenEnv's own client
(EnvClient over the /ws websocket): episodes, concurrent sessions with their own tasks, a client
killed mid-episode, bad requests, the session bound, and a clean SIGTERM."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request

import gymnasium as gym
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

pytest.importorskip("openenv")

from envs.derived_tasks import derive_tasks  # noqa: E402
from envs.servers.episode import unwrap_tool_response  # noqa: E402
from envs.servers.openenv_server import WikiSimAction, WikiSimClient  # noqa: E402
from envs.tools import tool_schema  # noqa: E402
from tests.envs.server_support import ROOT, ServerProcess  # noqa: E402

MAX_SESSIONS = 3


@pytest.fixture(scope="module")
def tasks(default_wiki, tmp_path_factory):
    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 4, seed=5)]
    path = tmp_path_factory.mktemp("openenv") / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path, tasks


@pytest.fixture(scope="module")
def server(default_wiki, tasks):
    proc = ServerProcess("openenv", "--wiki", str(default_wiki), "--tasks", str(tasks[0]),
                         "--max-sessions", str(MAX_SESSIONS), "--max-request-bytes", "200000")
    yield proc
    assert proc.stop() == 0, proc.output()
    assert "stopped" in proc.output()


def _http(url, data=None):
    request = urllib.request.Request(url, data=None if data is None else data.encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_listens_on_loopback_with_a_health_check(server):
    assert server.url.startswith("http://127.0.0.1:")
    assert _http(server.url + "/health") == (200, '{"status":"healthy"}')


def test_an_episode_gives_the_environments_outputs_and_reward(server, default_wiki, tasks):
    _, task_list = tasks
    task = task_list[0]
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=task_list, tools=["search", "visit"])
    env.reset(options={"task_index": 0})
    direct, *_ = env.step('<tool_call>\n{"name": "search", "arguments": {"query": ["capital city"]}}\n</tool_call>')

    async def play():
        async with WikiSimClient(base_url=server.url) as client:
            first = await client.reset(task_index=0)
            assert first.observation.question == task["question"] and not first.done
            assert first.observation.tools == [tool_schema(t) for t in env.unwrapped.tools]
            found = await client.step(WikiSimAction(tool="search", arguments={"query": ["capital city"]}))
            assert found.observation.text == unwrap_tool_response(direct)
            assert (found.reward, found.done, found.observation.tool_name) == (0.0, False, "search")
            bad = await client.step(WikiSimAction(tool="visit", arguments={"url": 7}))
            assert bad.observation.text.startswith("Error") and not bad.done  # the tool's own message
            turn = await client.step(WikiSimAction(turn="<think>sure</think>\n<answer>" + task["answer"] + "</answer>"))
            assert turn.done and turn.reward == 1.0 and turn.observation.is_correct
            assert turn.observation.termination == "answer"
            state = await client.state()
            assert (state.task_id, state.num_tool_calls, state.step_count) == (task["id"], 2, 3)

    asyncio.run(play())
    env.close()


def test_concurrent_sessions_each_play_their_own_task(server, tasks):
    _, task_list = tasks

    async def one(i):
        async with WikiSimClient(base_url=server.url) as client:
            obs = await client.reset(task_index=i)
            await asyncio.sleep(0.05)  # let the other sessions interleave
            await client.step(WikiSimAction(tool="search", arguments={"query": [task_list[i]["answer"]]}))
            end = await client.step(WikiSimAction(answer=task_list[i]["answer"]))
            return obs.observation.question, end.reward

    async def all_at_once():
        return await asyncio.gather(*(one(i) for i in range(MAX_SESSIONS)))

    results = asyncio.run(all_at_once())
    assert [q for q, _ in results] == [t["question"] for t in task_list[:MAX_SESSIONS]]
    assert [r for _, r in results] == [1.0] * MAX_SESSIONS


KILLED_CLIENT = """
import json, sys, time
from websockets.sync.client import connect
ws = connect(sys.argv[1].replace("http://", "ws://") + "/ws")
for message in ({"type": "reset", "data": {"task_index": 1}},
                {"type": "step", "data": {"tool": "search", "arguments": {"query": ["a"]}}}):
    ws.send(json.dumps(message))
    assert json.loads(ws.recv())["type"] == "observation"
print("mid-episode", flush=True)
time.sleep(600)
"""


def test_a_client_killed_mid_episode_frees_its_session(server):
    """A raw websocket client (the OpenEnv wire protocol, without OpenEnv's slow import) is
    killed mid-episode while OpenEnv clients hold the other slots."""
    kid = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, server.url], cwd=ROOT, stdout=subprocess.PIPE,
                           text=True)

    async def run():
        holders = [await WikiSimClient(base_url=server.url).connect() for _ in range(MAX_SESSIONS - 1)]
        try:
            for holder in holders:
                await holder.reset(task_index=0)
            assert kid.stdout.readline().strip() == "mid-episode"
            # Every slot is held: a new session is told why and closed (OpenEnv sends the error on connect).
            async with ws_connect(server.url.replace("http://", "ws://") + "/ws") as raw:
                refusal = json.loads(await raw.recv())
            assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
            kid.kill()
            kid.wait()
            for _ in range(100):  # the killed session is closed and its slot serves again
                try:
                    async with WikiSimClient(base_url=server.url) as client:
                        return (await client.reset(task_index=2)).observation.question
                except (RuntimeError, ConnectionClosed):  # not freed yet: refused
                    await asyncio.sleep(0.1)
        finally:
            for holder in holders:
                await holder.disconnect()

    try:
        assert asyncio.run(run())
    finally:
        kid.kill()
        kid.wait()
    assert _http(server.url + "/health")[0] == 200


def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(server):
    async def bad_messages():
        async with WikiSimClient(base_url=server.url) as client:
            await client.reset(task_index=0)
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                await client.step(WikiSimAction.model_construct(tool="search", answer="x", arguments={}))
            with pytest.raises(RuntimeError, match="task_index"):
                await client.reset(task_index=99)
            ok = await client.step(WikiSimAction(tool="search", arguments={"query": ["Paris"]}))
            assert "Paris" in ok.observation.text  # the same session goes on
            own = await client.reset(task={"question": "Which city is the capital of France?", "answer": "Paris"})
            assert own.observation.question == "Which city is the capital of France?"
            assert (await client.step(WikiSimAction(answer="Paris"))).reward == 1.0

    asyncio.run(bad_messages())
    status, body = _http(server.url + "/step", json.dumps({"action": {"tool": "search", "answer": "x"}}))
    assert status == 422 and "exactly one of tool" in body
    status, body = _http(server.url + "/step", json.dumps({"action": {"answer": "x"}}))
    assert status == 400 and "websocket" in body  # HTTP /step has no session
    status, body = _http(server.url + "/step", json.dumps({"action": {"answer": "a" * 300_000}}))
    assert status == 413 and "smaller request" in body
    assert _http(server.url + "/health")[0] == 200


def test_a_bad_command_line_is_one_line_and_nonzero(tmp_path, default_wiki):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "websailor.cli", "serve", "openenv", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})

    missing = run("--wiki", str(tmp_path), "--tasks", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "error" in missing.stderr
