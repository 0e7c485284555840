"""SFT on gold simulator trajectories teaches a tiny model (short CPU version).

Gold data: the heuristic agent on tasks derived from the default simulator, compact
environment, rejection-sampled. This short test checks that SFT lowers the loss on the
assistant tokens of *held-out* trajectories well below the untrained model's. The full
claim (>= 90% strictly well-formed turns on held-out tasks) is NOT shown here:
``python -m benchmarks.sft_learning`` measures it and writes the learning curve (1800 steps,
width 128, 14.5 minutes on two CPU cores: 67% of held-out turns well formed, from 0%).
"""

from __future__ import annotations

import torch

from envs.derived_tasks import derive_tasks
from envs.trajectory import write_trajectories
from trainers.gold import heuristic_trajectories, make_env
from trainers.sft import SFTConfig, masked_token_loss_sum, train
from trainers.sft_data import FilterConfig, build_examples, read_records
from trainers.tiny_lm import tiny_lm


@torch.no_grad()
def _heldout_loss(model, examples) -> float:
    model.eval()
    total = tokens = 0.0
    for ex in examples:
        logits = model(input_ids=ex.input_ids[None]).logits
        total += float(masked_token_loss_sum(logits, ex.input_ids[None], ex.loss_mask[None]))
        tokens += int(ex.loss_mask[1:].sum())
    model.train()
    return total / tokens


def test_sft_on_gold_trajectories_lowers_heldout_loss(default_wiki, tmp_path):
    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 28, seed=0)]
    env = make_env(default_wiki, tasks)
    try:
        records = heuristic_trajectories(env, len(tasks))
    finally:
        env.close()
    assert sum(r["is_correct"] for r in records) >= len(records) // 2  # the gold agent mostly succeeds
    write_trajectories(tmp_path / "train.jsonl", records[:20])
    write_trajectories(tmp_path / "heldout.jsonl", records[20:])
    model, tok = tiny_lm(hidden=64, seed=0)
    heldout, _ = build_examples(read_records([str(tmp_path / "heldout.jsonl")]), tok, FilterConfig())
    assert heldout
    before = _heldout_loss(model, heldout)
    config = SFTConfig(data=[str(tmp_path / "train.jsonl")], model="-", output_dir=str(tmp_path / "run"), lr=5e-3,
                       min_lr=5e-5, max_steps=16, batch_size=2, warmup_ratio=0.1, tensorboard="off",
                       save_every=10 ** 6)
    result = train(config, model=model, tokenizer=tok)
    assert result.filter_report["dropped"].get("incorrect", 0) == sum(not r["is_correct"] for r in records[:20])
    after = _heldout_loss(model, heldout)
    assert after < 0.7 * before, (before, after)


def test_format_validity_plays_episodes_and_counts_strict_turns(default_wiki):
    from trainers.sft_eval import format_validity

    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 2, seed=0)]
    env = make_env(default_wiki, tasks)
    model, tok = tiny_lm(hidden=32, seed=0)
    try:
        result = format_validity(model, tok, env, [0, 1], max_new_tokens=8, max_turns=2)
    finally:
        env.close()
    # an untrained model writes noise: every turn is counted and none is well formed
    assert result["turns"] == 4 and result["strict_turns"] == 0 and result["rate"] == 0.0
    assert model.training  # the training mode is restored
