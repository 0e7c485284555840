"""bf16 compute with fp32 master weights: one update at lr 1e-6 moves the weights as the fp32 update does."""

from __future__ import annotations

import copy

import torch

from tests.trainers import toy_env
from tests.trainers.test_memory import _trajectories
from trainers.grpo import GRPOConfig, GRPOTrainer


def _delta(tmp_path, tok, model, dtype):
    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(tmp_path / dtype), env_id=toy_env.SPEC, batch_size=6,
                     group_size=2, micro_batch_size=6, pool_size=1, device="cpu", tensorboard="off",
                     learning_rate=1e-6, max_grad_norm=0.0, dtype=dtype)
    trainer = GRPOTrainer(cfg, copy.deepcopy(model), tok, toy_env.TASKS[:1])
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())  # master weights
    metrics = trainer.update(_trajectories(len(tok)), [1.0, -1.0, 0.5, -0.5, 2.0, -2.0], [True] * 6)
    assert metrics["train/skipped"] == 0
    return torch.cat([(a.detach().float() - b.detach().float()).flatten()
                      for a, b in zip(trainer.model.parameters(), model.parameters())])


def test_bf16_update_at_lr_1e6_matches_the_fp32_update(tmp_path):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    fp32 = _delta(tmp_path, tok, model, "float32")
    bf16 = _delta(tmp_path, tok, model.to(torch.bfloat16).float(), "bfloat16")  # a bf16 checkpoint, upcast
    fp32_ref = _delta(tmp_path, tok, model.to(torch.bfloat16).float(), "float32")
    changed32, changed16 = (fp32_ref != 0).float().mean(), (bf16 != 0).float().mean()
    assert changed32 > 0.95 and changed16 > 0.95 * changed32
    cos = torch.nn.functional.cosine_similarity(bf16, fp32_ref, dim=0)
    assert cos > 0.95 and abs(bf16.norm() / fp32_ref.norm() - 1) < 0.05
    assert fp32.abs().max() <= 1.01e-6 * 2  # Adam's first step is about lr per weight

    # Why: the same step on bf16 parameters with a plain AdamW rounds most updates away.
    pure = copy.deepcopy(model).to(torch.bfloat16)
    before = [p.detach().clone() for p in pure.parameters()]
    opt = torch.optim.AdamW(pure.parameters(), lr=1e-6, weight_decay=0.0)
    for p in pure.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    moved = torch.cat([(p.detach() != b).flatten() for p, b in zip(pure.parameters(), before)]).float().mean()
    assert moved < 0.2
