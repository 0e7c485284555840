"""A scripted agent and a tiny model go through the same episode runner (envs.episode.run_episode)."""

from __future__ import annotations

import gymnasium as gym
import torch

from envs.baselines import HeuristicAgent
from envs.episode import failure_info, run_episode
from trainers.policies import PolicyError
from trainers.rollout import Trajectory
from trainers.sft_eval import GreedyAgent
from trainers.tiny_lm import tiny_lm

from .conftest import MINI_ENV_ID


def test_heuristic_and_tiny_model_play_through_one_runner():
    torch.set_num_threads(1)
    env = gym.make(MINI_ENV_ID)
    model, tokenizer = tiny_lm(hidden=32, seed=0)
    steps: list[tuple[str, str]] = []
    try:
        played = {}
        for agent in (HeuristicAgent(), GreedyAgent(model.eval(), tokenizer, env, max_new_tokens=8)):
            played[agent.name] = run_episode(env, agent, options={"task_index": 1}, max_turns=3,
                                             on_step=lambda action, step, n=agent.name: steps.append((n, action)))
    finally:
        env.close()
    heuristic, greedy = played["heuristic"], played["greedy"]
    assert heuristic.finished and heuristic.is_correct and heuristic.task.id == greedy.task.id == "sdo"
    # the untrained model writes noise: every turn it wrote is in the transcript the runner returns
    model_turns = [a for n, a in steps if n == "greedy"]
    assert 1 <= greedy.turns == len(model_turns) <= 3
    assert [m["content"] for m in greedy.messages if m["role"] == "assistant"] == model_turns
    assert greedy.messages[:2] == heuristic.messages[:2]  # the same system prompt and question
    # the evaluation's view of a scripted episode: a Trajectory without token ids
    traj = Trajectory.from_episode(heuristic, index=4, policy="heuristic")
    record = traj.to_record(timing=False)
    assert traj.num_turns == heuristic.turns and traj.truncated is False and traj.token_ids == []
    assert {k: record[k] for k in ("id", "reward", "is_correct", "termination", "num_tool_calls", "policy")} == {
        k: v for k, v in heuristic.record("heuristic").items()
        if k in ("id", "reward", "is_correct", "termination", "num_tool_calls", "policy")}


def test_a_policy_endpoint_failure_is_a_policy_error_and_any_other_an_env_error():
    assert failure_info({}, PolicyError("endpoint down"))["termination"] == "policy_error"
    assert failure_info({}, OSError("disk"))["termination"] == "env_error"
