"""trainers.losses.policy_loss equals TRL GRPOTrainer's loss (loss_type="dapo", beta=0,
epsilon=0.2, epsilon_high=0.28, scale_rewards="none") and its gradient, to 1e-5.

TRL's own code path runs: ``GRPOTrainer._compute_loss`` of a real trainer instance.
In the first test only its log-probability forward is replaced (so both sides see the
same log-probs); in the second nothing is replaced and both sides run the same tiny model.
"""

from __future__ import annotations

import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL is a test dependency: pip install -e '.[test]'")

from trainers.losses import policy_loss, token_logprobs  # noqa: E402

B, P, T = 6, 3, 9


@pytest.fixture(scope="module")
def trl_trainer(tmp_path_factory):
    from datasets import Dataset
    from transformers import ByT5Tokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = ByT5Tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("trl")), loss_type="dapo", beta=0.0, epsilon=0.2,
        epsilon_high=0.28, scale_rewards="none", per_device_train_batch_size=B, num_generations=B // 2,
        max_completion_length=T, use_cpu=True, report_to=[], save_strategy="no",
        bf16=False,  # TRL defaults to bf16 autocast; the comparison is in float32
    )
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=args,
        train_dataset=Dataset.from_list([{"prompt": "q"}] * B), processing_class=tok,
    )
    # Set by Trainer's training loop before compute_loss; one micro-batch per step here.
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    completion_ids = torch.randint(3, 200, (B, T), generator=g)
    completion_mask = torch.ones(B, T, dtype=torch.long)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    for b, n in enumerate(lengths.tolist()):
        completion_mask[b, n:] = 0  # right padding, as TRL lays out completions
    tool_mask = (torch.rand(B, T, generator=g) > 0.2).long()  # tool-response tokens inside completions
    advantages = torch.randn(B, generator=g)
    return completion_ids, completion_mask, tool_mask, advantages


def _trl_inputs(completion_ids, completion_mask, tool_mask, advantages, old):
    mask = completion_mask * tool_mask
    return {
        "prompt_ids": torch.randint(3, 200, (B, P), generator=torch.Generator().manual_seed(1)),
        "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "advantages": advantages,
        "old_per_token_logps": old,
        "num_items_in_batch": mask.sum(),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_policy_loss_equals_trl_dapo_on_identical_logprobs(trl_trainer, seed, monkeypatch):
    completion_ids, completion_mask, tool_mask, advantages = _inputs(seed)
    g = torch.Generator().manual_seed(100 + seed)
    base = -torch.rand(B, T, generator=g) * 4
    # ratios spread over [exp(-0.6), exp(0.6)] so both clip edges (0.8, 1.28) are crossed
    old = base + (torch.rand(B, T, generator=g) - 0.5) * 1.2
    ours_lp = base.clone().requires_grad_(True)
    trl_lp = base.clone().requires_grad_(True)

    def fake_forward(model, input_ids, attention_mask, logits_to_keep, **kw):
        assert logits_to_keep == T
        return trl_lp, torch.zeros(B, T), None

    monkeypatch.setattr(trl_trainer, "_get_per_token_logps_and_entropies", fake_forward)
    inputs = _trl_inputs(completion_ids, completion_mask, tool_mask, advantages, old)
    trl_loss = trl_trainer._compute_loss(trl_trainer.model, inputs)
    trl_loss.backward()

    mask = completion_mask * tool_mask
    ours = policy_loss(ours_lp, old, advantages, mask, clip_low=0.2, clip_high=0.28)
    ours.backward()

    ratio = torch.exp(base - old)[mask.bool()]
    assert (ratio < 0.8).any() and (ratio > 1.28).any()  # the clip is exercised on both sides
    assert ours.item() == pytest.approx(trl_loss.item(), abs=1e-5)
    assert torch.allclose(ours_lp.grad, trl_lp.grad, atol=1e-5, rtol=0)
    assert (ours_lp.grad[~mask.bool()] == 0).all()


def test_policy_loss_equals_trl_dapo_through_the_model(trl_trainer):
    """No replacement: TRL runs its own forward (fused LM head) on the tiny Qwen2; we run
    ours (plain forward, shifted logits, token_logprobs). Loss and every parameter gradient agree."""
    model = trl_trainer.model
    completion_ids, completion_mask, tool_mask, advantages = _inputs(7)
    inputs = _trl_inputs(completion_ids, completion_mask, tool_mask, advantages, None)
    input_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], completion_mask], dim=1)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        current = token_logprobs(logits[:, P - 1 : -1], completion_ids)
    old = current + (torch.rand(B, T, generator=torch.Generator().manual_seed(3)) - 0.5) * 1.2
    inputs["old_per_token_logps"] = old

    model.zero_grad()
    trl_loss = trl_trainer._compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model.zero_grad()
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logp = token_logprobs(logits[:, P - 1 : -1], completion_ids)
    ours = policy_loss(logp, old, advantages, completion_mask * tool_mask)
    ours.backward()

    assert ours.item() == pytest.approx(trl_loss.item(), abs=1e-5)
    assert trl_grads, "TRL's loss produced no parameter gradients"
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, trl_grads[name], atol=1e-5, rtol=0), name
