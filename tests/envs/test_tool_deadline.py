"""Every tool call has a deadline the environment enforces; abandoned calls are bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from envs.deadline import DeadlineRunner, ToolBusy, ToolTimeout
from envs.env import MAX_ABANDONED_TOOL_CALLS, ResearchEnv
from envs.protocol import format_turn
from envs.tools.base import ToolResult

from .conftest import TASKS


class BlockingTool:
    """Blocks until released (a hung backend); counts the calls that started."""

    name = "slow"
    description = "Never answers in time."
    parameters = {"type": "object", "properties": {}, "required": []}

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0
        self.threads: set[int] = set()

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        self.started += 1
        self.threads.add(threading.get_ident())
        if arguments.get("fast"):
            return ToolResult("quick")
        self.release.wait(30)
        return ToolResult("too late")


def call(name, **arguments):
    return format_turn("t", tool_call=(name, arguments))


def test_a_call_past_its_deadline_gets_an_error_and_the_episode_goes_on():
    tool = BlockingTool()
    env = ResearchEnv([tool], TASKS, tool_timeout_s=0.2, current_date="2025-07-18")
    try:
        env.reset(options={"task_index": 0})
        obs, reward, terminated, truncated, info = env.step(call("slow"))
        assert "did not answer within its deadline of 0.2 s" in obs, obs
        assert info["tool_timed_out"] and info["tool_error"].startswith("timeout") and not info["tool_ok"]
        assert 0.2 <= info["tool_latency_s"] < 5 and not (terminated or truncated)
        obs, *_, info = env.step(call("slow", fast=True))  # a fresh worker answers the next call
        assert "quick" in obs and info["tool_ok"] and not info["tool_timed_out"]
        _, _, terminated, _, _ = env.step(format_turn("t", answer="Santa Claus"))
        assert terminated
    finally:
        tool.release.set()
        env.close()


def test_abandoned_calls_are_bounded_then_refused_without_a_new_thread():
    tool = BlockingTool()
    env = ResearchEnv([tool], TASKS, tool_timeout_s={"slow": 0.05}, current_date="2025-07-18", max_tool_calls=50)
    try:
        env.reset(options={"task_index": 0})
        for _ in range(MAX_ABANDONED_TOOL_CALLS):
            *_, info = env.step(call("slow"))
            assert info["tool_error"].startswith("timeout")
        threads_before = threading.active_count()
        for _ in range(10):
            obs, *_, info = env.step(call("slow"))
            assert info["tool_error"].startswith("busy") and "not answering" in obs
        assert tool.started == MAX_ABANDONED_TOOL_CALLS  # refused calls never reached the tool
        assert threading.active_count() <= threads_before
        tool.release.set()
        deadline = time.monotonic() + 10
        while env.unwrapped._tool_runner.abandoned() and time.monotonic() < deadline:
            time.sleep(0.01)
        obs, *_, info = env.step(call("slow", fast=True))  # the finished calls free their places
        assert "quick" in obs
    finally:
        tool.release.set()
        env.close()


def test_calls_in_time_reuse_one_worker_thread_and_keep_exceptions():
    runner = DeadlineRunner(max_abandoned=1)
    idents = {runner.run(threading.get_ident, 5) for _ in range(20)}
    assert len(idents) == 1 and threading.get_ident() not in idents

    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        runner.run(boom, 5)
    gate = threading.Event()
    with pytest.raises(ToolTimeout):
        runner.run(lambda: gate.wait(10), 0.05)
    with pytest.raises(ToolBusy):
        runner.run(lambda: 1, 5)
    gate.set()
    deadline = time.monotonic() + 10
    while runner.abandoned() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runner.run(lambda: 2, 5) == 2
    runner.close()
    with pytest.raises(RuntimeError):
        runner.run(lambda: 3, 5)


@pytest.mark.parametrize("value", [0, -1, "5", True, {"nope": 1.0}, {"slow": 0}])
def test_bad_timeouts_are_refused(value):
    with pytest.raises(ValueError, match="tool_timeout_s"):
        ResearchEnv([BlockingTool()], TASKS, tool_timeout_s=value)
