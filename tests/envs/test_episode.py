"""The one episode runner (envs/episode.py): scripted agents, turn caps, step hooks, the record."""

from __future__ import annotations

import pytest

from envs.baselines import HeuristicAgent, RandomAgent
from envs.env import ResearchEnv
from envs.episode import (AgentError, cut_answer, ended_without_answer, failure_info, run_episode,
                          termination_of)
from envs.protocol import format_turn
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool
from envs.trajectory import REQUIRED_KEYS

from .conftest import TASKS, MiniWiki


def _env() -> ResearchEnv:
    wiki = MiniWiki()
    return ResearchEnv([SearchTool(wiki), VisitTool(wiki)], TASKS, current_date="2025-07-18")


class Scripted:
    """Plays a fixed list of turns, and remembers what it was shown."""

    name = "scripted"

    def __init__(self, turns: list[str]):
        self.turns, self.seen = list(turns), []

    def reset(self, obs, info):
        self.seen = [obs]

    def act(self, obs, info):
        self.seen.append(obs)
        return self.turns.pop(0)


def test_the_runner_plays_what_stepping_by_hand_plays():
    turns = [format_turn("look", tool_call=("search", {"query": ["Helioseismic Imager"]})),
             format_turn("done", answer="Helioseismic and Magnetic Imager")]
    env = _env()
    env.reset(options={"task_index": 1})
    rewards = [env.step(t)[1] for t in turns]
    by_hand = env.messages()
    episode = run_episode(env, Scripted(turns), options={"task_index": 1})
    assert episode.messages == by_hand and episode.reward == sum(rewards) and episode.turns == 2
    assert episode.finished and episode.termination == "answer" and episode.is_correct
    record = episode.record("scripted")
    assert set(REQUIRED_KEYS) <= set(record) and record["id"] == "sdo" and record["num_tool_calls"] == 1


def test_scripted_baselines_go_through_it():
    env = _env()
    heuristic = [run_episode(env, HeuristicAgent(), options={"task_index": i}) for i in range(3)]
    assert all(e.is_correct and e.termination == "answer" for e in heuristic)
    assert [e.turns for e in heuristic] == [e.info["turn"] for e in heuristic]
    rand = run_episode(env, RandomAgent(seed=3), options={"task_index": 0})
    assert rand.finished and rand.termination in ("answer", "format_error", "max_tool_calls")


def test_max_turns_stops_an_episode_and_on_step_sees_every_turn():
    seen = []
    turns = [format_turn("look", tool_call=("search", {"query": ["x"]}))] * 3
    episode = run_episode(_env(), Scripted(turns), options={"task_index": 0}, max_turns=2,
                          on_step=lambda action, step: seen.append((action, step.terminated, step.truncated)))
    assert episode.turns == 2 and not episode.finished and len(seen) == 2
    assert all(not done and not cut for _, done, cut in seen)
    with pytest.raises(ValueError, match="unfinished"):
        episode.record("scripted")
    with pytest.raises(ValueError, match="max_turns must be a positive integer"):
        run_episode(_env(), Scripted(turns), max_turns=0)


def test_an_agent_error_propagates():
    class Broken(Scripted):
        def act(self, obs, info):
            raise AgentError("endpoint down")

    with pytest.raises(AgentError, match="endpoint down"):
        run_episode(_env(), Broken([]), options={"task_index": 0})


def test_shared_end_of_episode_rules():
    assert termination_of({}) == "unknown" and termination_of({"termination": "answer"}) == "answer"
    assert not ended_without_answer("answer") and ended_without_answer("max_tool_calls")
    assert failure_info({"turn": 2}, AgentError("down"))["termination"] == "policy_error"
    failed = failure_info({"turn": 2}, RuntimeError("x" * 2000))
    assert failed["termination"] == "env_error" and failed["turn"] == 2 and len(failed["error"]) == 500
    reward, info = cut_answer(1.0, {"termination": "answer", "is_correct": True})
    assert reward == 0.0 and info["termination"] == "token_limit" and not info["is_correct"]
    assert info["cut_answer"] == {"reward": 1.0, "is_correct": True}
    assert cut_answer(0.5, {"termination": "max_tool_calls"}) == (0.5, {"termination": "max_tool_calls"})
