"""The multi-task toy environment (tests/trainers/toy_env.py) that the GRPO tests and the
learning benchmark train on: made by gym.make, one answer per question."""

from __future__ import annotations

import gymnasium as gym

from tests.trainers import toy_env


def test_every_task_has_its_own_answer_and_a_fixed_answer_solves_one_task():
    answers = [t["answer"] for t in toy_env.TASKS]
    assert len(toy_env.TASKS) >= 4 and len(set(answers)) == len(answers)
    env = gym.make(toy_env.SPEC, tools=["lookup"])
    try:
        for word in answers:
            rewards = []
            for task in toy_env.TASKS:
                obs, _ = env.reset(options={"task": task})
                assert task["question"] in obs
                _, reward, terminated, _, info = env.step(f"<think>{toy_env.key_of(task['question'])}</think>"
                                                          f"<answer>{word}</answer>")
                assert terminated and info["format_ok"]
                rewards.append(reward)
            assert rewards == [1.0 if t["answer"] == word else 0.0 for t in toy_env.TASKS]
        # the lookup tool's response depends on the colour asked for
        env.reset(options={"task": toy_env.TASKS[1]})
        obs, *_ = env.step('<think>look it up</think><tool_call>{"name": "lookup", "arguments": {"key": "blue"}}'
                           '</tool_call>')
        assert toy_env.CODES["blue"] in obs and toy_env.CODES["red"] not in obs
    finally:
        env.close()

