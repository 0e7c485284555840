"""The bounds the servers keep, in process: the MCP tool host's deadline, busy refusal, size cap and
error texts, the limits' validation, and the episode helper the TRL/OpenEnv adapters share."""

from __future__ import annotations

import threading
import time

import pytest

from envs.servers.episode import ToolEpisode, unwrap_tool_response
from envs.servers.limits import ServerLimits
from envs.servers.mcp_server import ToolHost
from envs.tools.base import ToolResult
from tests.envs.conftest import TASKS


class Slow:
    name, description, parameters = "slow", "sleeps", {"type": "object", "properties": {}}

    def __init__(self, seconds: float):
        self.seconds, self.release = seconds, threading.Event()

    def __call__(self, arguments):
        self.release.wait(self.seconds)
        return ToolResult("done")


class Boom:
    name, description, parameters = "boom", "raises", {"type": "object", "properties": {}}

    def __call__(self, arguments):
        raise RuntimeError("disk on fire")


def test_tool_host_bounds_every_call():
    slow = Slow(5.0)
    host = ToolHost({"slow": slow, "boom": Boom()},
                    ServerLimits(max_concurrent=1, call_timeout_s=0.2, max_request_bytes=100, max_abandoned_calls=1))
    try:
        start = time.monotonic()
        text, error = host.call("slow", {})
        assert error and "did not answer within 0.2 s" in text and time.monotonic() - start < 2
        text, error = host.call("slow", {})  # the abandoned call still runs: refused, not queued forever
        assert error and "not answering" in text
        slow.release.set()  # the abandoned call ends; calls are served again
        deadline = time.monotonic() + 10
        while "not answering" in host.call("slow", {})[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host.call("boom", {}) == ("Error: the boom tool failed (RuntimeError: disk on fire).", True)
        assert host.call("slow", {"x": "y" * 200})[0].startswith("Error: the arguments are")
        assert host.call("slow", ["not", "an", "object"])[1]
        assert "no tool named 'nope'" in host.call("nope", {})[0]
    finally:
        host.close()


def test_limits_say_what_was_wrong():
    with pytest.raises(ValueError, match="max_sessions must be an integer >= 1, got 0"):
        ServerLimits(max_sessions=0)
    with pytest.raises(ValueError, match="call_timeout_s must be a number > 0"):
        ServerLimits(call_timeout_s=0)


def test_episode_plays_structured_calls_as_turns():
    from tests.trainers.conftest import MINI_ENV_ID  # registers the in-memory environment

    episode = ToolEpisode(MINI_ENV_ID)
    try:
        with pytest.raises(ValueError, match="pass a task dict"):
            episode.reset()
        assert episode.reset({"question": "Q?", "answer": "Paris"}) == "Q?"
        found = episode.call("search", {"query": ["capital of France"]})
        assert "Paris" in found.observation and not found.observation.startswith("<tool_response>")
        assert not found.done and found.reward == 0.0
        end = episode.answer("Paris")
        assert end.done and end.reward == 1.0 and end.info["is_correct"]
        for late in (episode.call("search", {"query": ["x"]}), episode.answer("Paris"), episode.turn("<answer>Paris</answer>")):
            # a step after done is refused and never repeats the reward
            assert late.observation.startswith("Error: the episode is over") and late.done
            assert late.reward == 0.0 and not late.info.get("is_correct")
        assert episode.reward == 1.0  # the episode's own reward is kept
        episode.reset(TASKS[0])
        turn = episode.turn("<think>go</think>\n<tool_call>\n{\"name\": \"search\", \"arguments\": "
                            "{\"query\": [\"Epsom Derby\"]}}\n</tool_call>")
        assert "Epsom" in turn.observation
    finally:
        episode.close()
    assert unwrap_tool_response("<tool_response>\nabc\n</tool_response>\n\nnote") == "abc\n\nnote"
