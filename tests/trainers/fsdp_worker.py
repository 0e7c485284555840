"""GRPO updates on a fixed batch, alone or under ``torchrun`` (``python -m torch.distributed.run
--nproc_per_node 2 -m tests.trainers.fsdp_worker MODEL OUT PARALLEL``): the test compares the weights.

The batch is made here, the same on every rank (no sampling), so one process on the whole batch
and two processes on a half each must reach the same weights. Rank 0 gets the short trajectories
and rank 1 the long ones, so under a token budget rank 1 runs more micro-batches than rank 0
(FSDP must then run zero-loss passes on rank 0). The run: one update, checkpoint-1; a fresh
trainer resumes from it, a second update, checkpoint-2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from tests.trainers import toy_env
from trainers.grpo import GRPOConfig, GRPOTrainer
from trainers.models import load_lm as load_model
from trainers.losses import token_logprobs

ROWS = 8


def make_trainer(model_dir: str, out: str, parallel: str, dtype: str = "float32") -> GRPOTrainer:
    cfg = GRPOConfig(model=model_dir, tasks="unused", output_dir=out, env_id=toy_env.SPEC, steps=3,
                     batch_size=ROWS, group_size=2, micro_batch_size=4, micro_batch_tokens=96, learning_rate=1e-3,
                     pool_size=4, device="cpu", tensorboard="off", save_every=0, parallel=parallel, dtype=dtype,
                     progress=False)
    model, tok = load_model(model_dir, None, "float32")
    return GRPOTrainer(cfg, model, tok, toy_env.TASKS)


def fixed_batch(model_dir: str) -> tuple[list, list[float]]:
    """``ROWS`` trajectories (the first half short, the second long) with the model's own log-probabilities
    as the sampling ones (ratio 1), and advantages of both signs."""
    model, _ = load_model(model_dir, None, "float32")
    gen = torch.Generator().manual_seed(7)
    vocab = model.config.vocab_size
    trajs = []
    for i in range(ROWS):
        prompt = torch.randint(3, vocab, (6,), generator=gen).tolist()
        n = 8 + i if i < ROWS // 2 else 30 + i
        cont = torch.randint(3, vocab, (n,), generator=gen).tolist()
        mask = [1] * (n - 3) + [0, 0, 1]  # a masked "tool response" inside
        ids = torch.tensor([prompt + cont])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[:, len(prompt) - 1:-1]
            lps = token_logprobs(logits, ids[:, len(prompt):], 1.0)[0].tolist()
        trajs.append(SimpleNamespace(prompt_ids=prompt, token_ids=cont, loss_mask=mask, logprobs=lps))
    advantages = [(-1.0) ** i * (0.5 + 0.1 * i) for i in range(ROWS)]
    return trajs, advantages


def update(trainer: GRPOTrainer, trajs: list, advantages: list[float]) -> dict:
    """One update on this rank's share of the batch (contiguous, as the trainer splits groups)."""
    rank, world = trainer.dist.rank, trainer.dist.world_size
    share = len(trajs) // world
    mine = slice(rank * share, (rank + 1) * share)
    trainer.step += 1
    return trainer.update(trajs[mine], advantages[mine], [True] * share)


def main() -> None:
    model_dir, out, parallel = sys.argv[1:4]
    dtype = sys.argv[4] if len(sys.argv) > 4 else "float32"
    torch.set_num_threads(1)
    trajs, advantages = fixed_batch(model_dir)
    first = make_trainer(model_dir, out, parallel, dtype)
    metrics = [update(first, trajs, advantages)]
    first.save()
    second = make_trainer(model_dir, out, parallel, dtype)
    assert second.load_latest() and second.step == 1
    metrics.append(update(second, trajs, advantages))
    second.save()
    if second.dist.is_main:
        Path(out, "worker.json").write_text(json.dumps({"world_size": second.dist.world_size, "metrics": metrics,
                                                        "rank": int(os.environ.get("RANK", "0"))}))
    second.dist.destroy()


if __name__ == "__main__":
    main()
