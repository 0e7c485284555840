"""Evaluation reproduces: one generator per episode, seeded from the episode, whatever the batches
and the threads do."""

from __future__ import annotations

import json

import torch

from envs.tasks import task_from_dict, write_jsonl_tasks
from tests.envs.conftest import TASKS
from trainers.eval import EvalConfig, evaluate
from trainers.policies import TransformersPolicy
from trainers.rollout import RolloutConfig, collect, episode_seed

from .conftest import MINI_SHORT_ENV_ID, tiny_qwen2


def _records(trajs):
    return [json.dumps(t.to_record(timing=False), sort_keys=True) for t in trajs]


def test_a_row_samples_the_same_alone_or_in_a_batch(tokenizer):
    policy = TransformersPolicy(tiny_qwen2(seed=1, vocab_size=len(tokenizer)), tokenizer)
    prompts = [tokenizer.encode("Who wrote Hamlet?"), tokenizer.encode("x"), tokenizer.encode("A longer prompt here")]

    def sample(rows, seeds):
        gens = [torch.Generator().manual_seed(s) for s in seeds]
        return policy.generate(rows, max_new_tokens=16, temperature=1.0, top_p=0.95, generators=gens)

    alone = sample(prompts[:1], [7])[0]
    batched = sample(prompts, [7, 8, 9])
    torch.manual_seed(123)  # the global generator plays no part
    again = sample(list(reversed(prompts)), [9, 8, 7])
    assert alone.token_ids == batched[0].token_ids == again[2].token_ids
    assert batched[1].token_ids == again[1].token_ids and batched[2].token_ids == again[0].token_ids
    assert torch.allclose(torch.tensor(alone.logprobs), torch.tensor(batched[0].logprobs), atol=1e-4)
    assert batched[0].token_ids != batched[1].token_ids  # the rows do sample (different seeds differ)


def test_same_seed_same_trajectories_whatever_the_batching(tokenizer):
    model = tiny_qwen2(seed=2, vocab_size=len(tokenizer))
    policy = TransformersPolicy(model, tokenizer)

    def run(num_envs, seed=0, order=None, schedule="lockstep"):
        config = RolloutConfig(env_id=MINI_SHORT_ENV_ID, num_envs=num_envs, tool_workers=num_envs, max_new_tokens=24,
                               temperature=0.85, top_p=0.95, seed=seed, max_batch_wait_s=0.0, schedule=schedule)
        tasks = TASKS[:3] if order is None else [TASKS[i] for i in order]
        torch.manual_seed(num_envs * 1000 + seed)  # a different global state each time: it must not matter
        return collect(policy, tasks, config, group_size=2, progress=False)

    first, second = run(4), run(4)
    assert _records(first) == _records(second)  # byte-identical
    # Other batches entirely (one episode at a time; batches as the threads finish): the same samples.
    # (Only the log-probabilities' last bits may move with the batch shape: hence lockstep for byte equality.)
    for other in (run(1), run(4, schedule="async")):
        assert [t.messages for t in other] == [t.messages for t in first]
        assert [t.token_ids for t in other] == [t.token_ids for t in first]
    reordered = run(3, order=[2, 0, 1])  # the same tasks in another order: each episode unchanged
    by_task = {(t.task["id"], t.index % 2): t.token_ids for t in reordered}
    assert all(by_task[(t.task["id"], t.index % 2)] == t.token_ids for t in first)
    other = run(4, seed=1)
    assert [t.token_ids for t in other] != [t.token_ids for t in first]
    assert episode_seed(0, TASKS[0], 0) != episode_seed(0, TASKS[0], 1) != episode_seed(1, TASKS[0], 1)


def test_eval_twice_gives_byte_identical_trajectories(tmp_path, tokenizer):
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl_tasks(tasks, [task_from_dict(t) for t in TASKS[:3]])
    policy = TransformersPolicy(tiny_qwen2(seed=3, vocab_size=len(tokenizer)), tokenizer)
    config = EvalConfig(tasks=str(tasks), policy="transformers", model="unused", env_id=MINI_SHORT_ENV_ID, k=2,
                        num_envs=3, max_new_tokens=24, seed=5)
    task_dicts = [task_from_dict(t).to_dict() for t in TASKS[:3]]
    runs = [evaluate(policy, task_dicts, config) for _ in range(2)]
    assert _records(runs[0][2]) == _records(runs[1][2])
    assert runs[0][0] == runs[1][0]
