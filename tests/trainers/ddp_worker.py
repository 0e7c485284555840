"""Entry point for the torchrun test: ``python -m torch.distributed.run ... -m tests.trainers.ddp_worker
MODEL TASKS OUT``. Trains two GRPO steps and writes a per-rank digest of the weights."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from tests.trainers import toy_env
from trainers.grpo import GRPOConfig, run


def main() -> None:
    model_dir, tasks, out = sys.argv[1:4]
    torch.set_num_threads(1)
    from safetensors.torch import load_file

    before = sum(float(t.double().sum()) for t in load_file(str(Path(model_dir) / "model.safetensors")).values())
    cfg = GRPOConfig(model=model_dir, tasks=tasks, output_dir=out, env_id=toy_env.SPEC,
                     env_kwargs=json.dumps({"max_format_errors": 1}), steps=2, batch_size=16, group_size=4,
                     micro_batch_size=4, learning_rate=1e-3, max_new_tokens=48, pool_size=4, device="cpu",
                     tensorboard="off", save_every=0)
    import trainers.grpo as grpo

    captured = {}
    original = grpo.GRPOTrainer.train

    def train(self):
        result = original(self)
        captured["sum"] = sum(float(p.detach().double().sum()) for p in self.model.parameters())
        captured["world"] = self.dist.world_size
        return result

    grpo.GRPOTrainer.train = train
    run(cfg)
    rank = int(os.environ.get("RANK", "0"))
    Path(out, f"rank{rank}.json").write_text(json.dumps(
        {"param_sum": captured["sum"], "world_size": captured["world"], "changed": captured["sum"] != before}))


if __name__ == "__main__":
    main()
