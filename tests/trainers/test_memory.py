"""Token-budget micro-batches and gradient checkpointing: same update, less memory per pass."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from tests.trainers import toy_env
from trainers.grpo import GRPOConfig, GRPOTrainer
from trainers.memory import budget_slices


def test_budget_slices_by_rows_and_padded_tokens():
    assert budget_slices([5, 5, 5, 5], max_rows=2) == [slice(0, 2), slice(2, 4)]
    # 3 rows of 10 = 30 > 25: cut; the long row (40 > 25) is a slice of its own
    assert budget_slices([10, 10, 10, 40, 3, 3], max_rows=8, max_tokens=25) == [
        slice(0, 2), slice(2, 3), slice(3, 4), slice(4, 6)]
    assert budget_slices([], max_rows=4, max_tokens=10) == []
    with pytest.raises(ValueError):
        budget_slices([1], max_rows=0)


def _trajectories(vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (40, 12, 25, 7, 33, 18):
        ids = torch.randint(3, vocab, (n,), generator=g).tolist()
        mask = [1 if (i // 5) % 2 == 0 else 0 for i in range(n)]
        out.append(SimpleNamespace(prompt_ids=[3, 4, 5], token_ids=ids, loss_mask=mask,
                                   logprobs=[-2.0 if m else 0.0 for m in mask]))
    return out


def _updated(tmp_path, tok, model, **kw):
    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=6,
                     group_size=2, pool_size=1, device="cpu", tensorboard="off", learning_rate=1e-3,
                     max_grad_norm=0.0, **kw)
    trainer = GRPOTrainer(cfg, copy.deepcopy(model), tok, toy_env.TASKS[:1])
    trajs = _trajectories(len(tok))
    widths: list[int] = []
    trainer.model.register_forward_hook(lambda mod, args, kwargs, out: widths.append(kwargs["input_ids"].numel()),
                                        with_kwargs=True)
    metrics = trainer.update(trajs, [1.0, -1.0, 0.5, -0.5, 2.0, -2.0], [True] * 6)
    metrics["passes"] = widths
    return trainer.model, metrics


def test_token_budget_and_checkpointing_give_the_same_update(tmp_path):
    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    model = toy_env.tiny_model(tok, hidden=32)
    ref, ref_metrics = _updated(tmp_path / "a", tok, model, micro_batch_size=6)
    small, small_metrics = _updated(tmp_path / "b", tok, model, micro_batch_size=6, micro_batch_tokens=60,
                                    gradient_checkpointing=True)
    assert any(getattr(m, "gradient_checkpointing", False) for m in small.modules())
    # rows of 43, 15, 28, 10, 36, 21 ids: padded passes of 43, 2 x 28, 10, 36, 21 (2 x 36 = 72 > 60)
    assert ref_metrics["passes"] == [6 * 43] and small_metrics["passes"] == [43, 56, 10, 36, 21]
    assert ref_metrics["train/tokens"] == small_metrics["train/tokens"] > 0
    assert abs(ref_metrics["loss/policy"] - small_metrics["loss/policy"]) < 1e-5
    assert abs(ref_metrics["grad/norm"] - small_metrics["grad/norm"]) < 1e-4 * ref_metrics["grad/norm"]
    for (name, a), b, c in zip(ref.named_parameters(), small.parameters(), model.parameters()):
        step = (a - c).abs().max()
        assert step > 0 and (a - b).abs().max() <= 0.05 * step, name  # Adam's first step is about lr x sign
