"""The simulator environment trains under TRL's GRPOTrainer through rollout_func (tiny model, CPU)."""

from __future__ import annotations

import pytest
import torch

trl = pytest.importorskip("trl")
pytest.importorskip("datasets")

from envs.derived_tasks import derive_tasks  # noqa: E402
from trainers.adapters.trl import EnvRollout, env_reward, make_grpo_trainer, rollout_outputs  # noqa: E402
from trainers.gold import COMPACT_SYSTEM_PROMPT  # noqa: E402
from trainers.rollout import RolloutConfig, Trajectory  # noqa: E402
from trainers.tiny_lm import tiny_lm  # noqa: E402


def _traj(**kw) -> Trajectory:
    base = dict(task={}, messages=[], prompt_ids=[1, 2], token_ids=[3, 4, 5], loss_mask=[1, 0, 1],
                logprobs=[-0.5, 0.0, -0.2], reward=1.0, is_correct=True, termination="answer", num_tool_calls=1,
                truncated=False, info={})
    base.update(kw)
    return Trajectory(**base)


def test_rollout_outputs_keep_ids_masks_and_rewards():
    out = rollout_outputs([_traj(), _traj(reward=0.0, is_correct=False)])
    assert out["completion_ids"] == [[3, 4, 5]] * 2 and out["env_mask"] == [[1, 0, 1]] * 2
    assert out["env_reward"] == [1.0, 0.0]
    assert env_reward([], [], env_reward=out["env_reward"]) == [1.0, 0.0]
    with pytest.raises(ValueError, match=r"loss_mask \(2\)"):
        rollout_outputs([_traj(loss_mask=[1, 0])])


def test_prompts_map_back_to_tasks():
    tasks = [{"question": "Q1?", "answer": "a"}, {"question": "Q2?", "answer": "b"}]
    with pytest.raises(ValueError, match="share the question"):
        EnvRollout([*tasks, {"question": "Q1?", "answer": "other"}], RolloutConfig())
    rollout = EnvRollout(tasks, RolloutConfig())
    assert [row["prompt"][0]["content"] for row in rollout.dataset()] == ["Q1?", "Q2?"]


def test_grpo_trainer_trains_on_the_wikisim_environment(default_wiki, tmp_path):
    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 2, seed=3)]
    config = RolloutConfig(env_kwargs={"wiki_dir": str(default_wiki), "tasks": tasks, "tools": ["search"],
                                       "system_prompt": COMPACT_SYSTEM_PROMPT, "max_tool_calls": 2,
                                       "current_date": "2025-01-01"},
                           max_new_tokens=24, num_envs=4, tool_workers=2, max_total_tokens=4096)
    seen: list[dict] = []

    class Recording(EnvRollout):
        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            seen.append(out)
            return out

    def brevity(completions, **kwargs):  # a shaped reward with variance, so the step has a gradient
        return [-len(c[-1]["content"]) / 1000.0 for c in completions]

    model, tokenizer = tiny_lm(hidden=32, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = trl.GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=4,
                          max_steps=1, learning_rate=1e-2, logging_steps=1, report_to="none", save_strategy="no",
                          use_cpu=True, bf16=False, max_completion_length=4096, seed=0)
    trainer = make_grpo_trainer(model, tokenizer, Recording(tasks, config), args, reward_funcs=[brevity])
    trainer.train()
    (out,) = seen
    assert len(out["completion_ids"]) == 4  # one episode per (repeated) prompt
    for ids, mask, logps in zip(out["completion_ids"], out["env_mask"], out["logprobs"]):
        assert len(ids) == len(mask) == len(logps) and 0 in mask and 1 in mask  # observations are masked
        assert all(lp == 0.0 for lp, m in zip(logps, mask) if m == 0)
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert logged and all(torch.isfinite(torch.tensor(h["loss"])) for h in logged)
