"""GRPO with LoRA (peft): only the adapters move, checkpoints resume them, the final model is merged."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.trainers import toy_env
from tests.trainers.test_memory import _trajectories
from trainers import lora
from trainers.grpo import GRPOConfig, GRPOTrainer

pytest.importorskip("peft")


def _trainer(tmp_path, tok, model):
    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=6,
                     group_size=2, micro_batch_size=6, pool_size=1, device="cpu", tensorboard="off",
                     learning_rate=1e-2, lora_r=4, lora_alpha=8, lora_targets=["q_proj", "v_proj"])
    return GRPOTrainer(cfg, copy.deepcopy(model), tok, toy_env.TASKS[:1])


def test_lora_update_moves_only_the_adapters_and_resumes(tmp_path):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    trainer = _trainer(tmp_path, tok, model)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    for _ in range(2):  # lora_B starts at zero: the second step moves lora_A too
        metrics = trainer.update(_trajectories(len(tok)), [1.0, -1.0, 0.5, -0.5, 2.0, -2.0], [True] * 6)
        assert metrics["train/skipped"] == 0
    after = dict(trainer.model.named_parameters())
    moved = {n for n in before if not torch.equal(before[n], after[n])}
    assert moved and moved <= trainable and any("lora_B" in n for n in moved)
    trainer.step = 2
    trainer.save()

    again = _trainer(tmp_path, tok, model)
    assert again.load_latest() and again.step == 2
    for (n, a), b in zip(trainer.model.named_parameters(), again.model.parameters()):
        assert torch.equal(a, b), n
    merged = lora.merged(trainer.model)
    assert not any("lora_" in k for k in merged.state_dict())
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, trainer.model(input_ids=ids).logits, atol=1e-5)
        assert not torch.allclose(merged(ids).logits, model(ids).logits, atol=1e-5)
