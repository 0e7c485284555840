"""GRPO writes a sample of each step's rollouts to output_dir/rollouts/step-<n>.jsonl."""

from __future__ import annotations

import json

from tests.trainers import toy_env
from tests.trainers.test_grpo import FOUR_TASKS, cold_model_dir  # noqa: F401  (the fixture)
from trainers.rollout_samples import sample_indices


def test_sample_takes_one_of_each_group_first():
    assert sample_indices(8, 4, 3) == [0, 4, 1]
    assert sample_indices(8, 4, 20) == [0, 4, 1, 5, 2, 6, 3, 7]
    assert sample_indices(3, 1, 2) == [0, 1] and sample_indices(5, 2, 0) == []


def test_grpo_saves_a_readable_sample_of_each_steps_rollouts(cold_model_dir, tmp_path):  # noqa: F811
    from websailor.cli import main

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in FOUR_TASKS[:2]))
    out = tmp_path / "out"
    rc = main(["grpo", str(cold_model_dir), str(tasks), "--output-dir", str(out), "--env-id", toy_env.SPEC,
               "--steps", "2", "--batch-size", "4", "--group-size", "2", "--micro-batch-size", "4",
               "--learning-rate", "1e-3", "--max-new-tokens", "24", "--device", "cpu", "--tensorboard", "off",
               "--pool-size", "2", "--rollout-samples", "3"])
    assert rc in (0, None)
    assert sorted(p.name for p in (out / "rollouts").iterdir()) == ["step-1.jsonl", "step-2.jsonl"]
    rows = [json.loads(line) for line in (out / "rollouts" / "step-2.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and [(r["group"], r["sample"]) for r in rows] == [(0, 0), (1, 0), (0, 1)]
    for r in rows:
        assert r["step"] == 2 and r["messages"][-1]["role"] == "assistant" and "token_ids" not in r
        assert {"task", "reward", "is_correct", "termination", "num_tool_calls"} <= set(r)
    rc = main(["grpo", str(cold_model_dir), str(tasks), "--output-dir", str(tmp_path / "none"), "--env-id",
               toy_env.SPEC, "--steps", "1", "--batch-size", "2", "--group-size", "2", "--max-new-tokens", "8",
               "--device", "cpu", "--tensorboard", "off", "--pool-size", "1", "--rollout-samples", "0"])
    assert rc in (0, None) and not (tmp_path / "none" / "rollouts").exists()
