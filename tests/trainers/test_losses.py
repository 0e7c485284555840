"""trainers.losses against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.losses import (
    clip_fractions,
    entropy_from_logits,
    group_advantages,
    kl_k3,
    masked_mean,
    masked_sum,
    policy_loss,
    token_logprobs,
    token_logprobs_and_entropy,
    update_sums,
)


def test_loo_advantages_by_hand():
    # group 1: [1, 0, 0, 1]: loo baseline of item 0 is mean(0, 0, 1) = 1/3 -> 2/3; item 1: 0 - 2/3.
    # group 2: [0, 0, 0, 1]: item 3: 1 - 0 = 1; items 0-2: 0 - 1/3.
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    adv = group_advantages(r, 4)
    want = [2 / 3, -2 / 3, -2 / 3, 2 / 3, -1 / 3, -1 / 3, -1 / 3, 1.0]
    assert adv.tolist() == pytest.approx(want, abs=1e-7)


def test_mean_advantages_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    adv = group_advantages(r, 4, mode="mean")
    want = [0.5, -0.5, -0.5, 0.5, -0.25, -0.25, -0.25, 0.75]
    assert adv.tolist() == pytest.approx(want, abs=1e-7)


def test_non_binary_rewards_loo_and_mean():
    r = torch.tensor([0.2, 0.5, 0.8])  # one group of three
    loo = group_advantages(r, 3, mode="loo")
    # 0.2 - (0.5 + 0.8) / 2 = -0.45; 0.5 - 0.5 = 0; 0.8 - 0.35 = 0.45
    assert loo.tolist() == pytest.approx([-0.45, 0.0, 0.45], abs=1e-7)
    mean = group_advantages(r, 3, mode="mean")
    assert mean.tolist() == pytest.approx([-0.3, 0.0, 0.3], abs=1e-7)


def test_std_scaling_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # group std (unbiased) of [1, 0, 0, 1] = sqrt(1/3); mean advantages +-0.5 -> +-0.5 * sqrt(3)
    adv = group_advantages(r, 4, mode="mean", scale_std=True, eps=0.0)
    s = 0.5 * math.sqrt(3)
    assert adv.tolist() == pytest.approx([s, -s, -s, s], abs=1e-6)
    loo = group_advantages(r, 4, mode="loo", scale_std=True, eps=0.0)
    assert loo.tolist() == pytest.approx([s * 4 / 3, -s * 4 / 3, -s * 4 / 3, s * 4 / 3], abs=1e-6)


@pytest.mark.parametrize("mode", ["loo", "mean"])
@pytest.mark.parametrize("scale_std", [False, True])
def test_groups_of_one_and_all_equal_groups_give_zero(mode, scale_std):
    ones = group_advantages(torch.tensor([0.3, 1.0, 0.0]), 1, mode=mode, scale_std=scale_std)
    assert ones.tolist() == [0.0, 0.0, 0.0]
    equal = group_advantages(torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]), 3, mode=mode, scale_std=scale_std)
    assert equal.tolist() == [0.0] * 6
    assert torch.isfinite(equal).all()


def test_advantages_validate_shapes():
    with pytest.raises(ValueError, match=r"number of rewards \(6\) must be divisible by group_size \(4\)"):
        group_advantages(torch.zeros(6), 4)
    with pytest.raises(ValueError, match="1-D"):
        group_advantages(torch.zeros(2, 2), 2)
    with pytest.raises(ValueError, match="mode"):
        group_advantages(torch.zeros(4), 2, mode="median")  # type: ignore[arg-type]


def test_policy_loss_by_hand():
    # two sequences, three positions; the last position of sequence 2 is masked.
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]))
    new_p = torch.tensor([[0.5, 0.8, 0.2], [0.5, 0.8, 0.9]])  # ratios 1, 1.6, 0.4 / 1, 1.6, (1.8 masked)
    logp = torch.log(new_p).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    loss = policy_loss(logp, old, adv, mask)
    # seq 1 (A=+1): -min(r, clip(r, .8, 1.28)): -1, -1.28, -0.4
    # seq 2 (A=-1): -min(-r, -clip(r)) = max(r, clip(r)): 1, 1.6
    want = (-1 - 1.28 - 0.4 + 1 + 1.6) / 5
    assert loss.item() == pytest.approx(want, abs=1e-6)
    loss.backward()
    g = logp.grad
    # d/dlogp of -r*A is -r*A where the unclipped term is taken, 0 where the clip is active
    want_g = torch.tensor([[-1.0, 0.0, -0.4], [1.0, 1.6, 0.0]]) / 5
    assert torch.allclose(g, want_g, atol=1e-6)


def test_policy_loss_normalizer_splits_into_micro_batches():
    torch.manual_seed(0)
    logp = torch.randn(6, 5, requires_grad=True)
    old = logp.detach() + 0.3 * torch.randn(6, 5)
    adv = torch.randn(6)
    mask = (torch.rand(6, 5) > 0.3).long()
    full = policy_loss(logp, old, adv, mask)
    (g_full,) = torch.autograd.grad(full, logp)
    n = mask.sum()
    parts = policy_loss(logp[:2], old[:2], adv[:2], mask[:2], normalizer=n) + policy_loss(
        logp[2:], old[2:], adv[2:], mask[2:], normalizer=n
    )
    (g_parts,) = torch.autograd.grad(parts, logp)
    assert parts.item() == pytest.approx(full.item(), abs=1e-6)
    assert torch.allclose(g_parts, g_full, atol=1e-7)


def test_masked_tokens_get_exactly_zero_gradient_even_when_inf_or_nan():
    logp = torch.tensor([[-0.5, 50.0, float("nan")], [-1.0, -2.0, float("inf")]], requires_grad=True)
    old = torch.tensor([[-0.7, float("-inf"), 0.0], [-1.1, -1.9, float("-inf")]])
    mask = torch.tensor([[1, 0, 0], [1, 1, 0]])
    adv = torch.tensor([0.5, -2.0])
    loss = policy_loss(logp, old, adv, mask)
    assert torch.isfinite(loss)
    loss.backward()
    g = logp.grad
    assert torch.isfinite(g).all()
    assert g[0, 1].item() == 0.0 and g[0, 2].item() == 0.0 and g[1, 2].item() == 0.0
    assert (g[mask.bool()] != 0).all()


def test_masked_tokens_zero_gradient_through_a_model():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(11, 11)
    # positions 0-3 (trained) use ids 0-5, positions 4-6 (masked) use ids 6-10 only
    ids = torch.cat([torch.randint(0, 6, (3, 4)), torch.randint(6, 11, (3, 3))], dim=1)
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[:, 4:] = 0
    logits = emb(ids)  # position t's logits depend only on the embedding row of ids[:, t]
    logp = token_logprobs(logits, ids)
    loss = policy_loss(logp, logp.detach() - 0.1, torch.tensor([1.0, -1.0, 0.5]), mask)
    loss.backward()
    assert (emb.weight.grad[6:] == 0).all()
    for i in ids[:, :4].unique().tolist():
        assert emb.weight.grad[i].abs().sum().item() > 0


def test_policy_loss_all_masked_is_zero_not_nan():
    logp = torch.zeros(2, 3, requires_grad=True)
    loss = policy_loss(logp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3))
    assert loss.item() == 0.0
    loss.backward()
    assert (logp.grad == 0).all()


def test_policy_loss_shape_errors():
    with pytest.raises(ValueError, match="same"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"advantages must have shape \(B,\) = \(2,\)"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))


def test_clip_fractions():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.0, 1.5, 0.5, 1.1]]))
    f = clip_fractions(logp, old, torch.tensor([1.0]), torch.ones(1, 4))
    assert f == {"low": 0.0, "high": 0.25, "region": 0.25}
    f = clip_fractions(logp, old, torch.tensor([-1.0]), torch.ones(1, 4))
    assert f == {"low": 0.25, "high": 0.0, "region": 0.25}


def test_kl_k3_is_zero_at_equality_and_positive_otherwise():
    a = torch.tensor([[-1.0, -2.0]])
    assert kl_k3(a, a).tolist() == [[0.0, 0.0]]
    b = torch.tensor([[-1.5, -1.0]])
    d = b - a
    assert torch.allclose(kl_k3(a, b), torch.exp(d) - d - 1)
    assert (kl_k3(a, b) > 0).all()


def test_token_logprobs_and_entropy():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # p = [0.25, 0.75]
    assert token_logprobs(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))
    assert token_logprobs(logits, torch.tensor([[0]]), temperature=2.0).item() == pytest.approx(
        math.log(1 / (1 + math.sqrt(3)))
    )
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert entropy_from_logits(logits).item() == pytest.approx(h, abs=1e-6)


def test_masked_mean():
    x = torch.tensor([[1.0, 2.0, float("nan")]])
    assert masked_mean(x, torch.tensor([[1, 1, 0]])).item() == 1.5
    assert masked_mean(x, torch.zeros(1, 3)).item() == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_logprobs_and_entropy_match_the_full_computation_with_gradients(dtype):
    torch.manual_seed(0)
    base = torch.randn(2, 7, 13) * 3
    ids = torch.randint(0, 13, (2, 7))
    weights = torch.randn(2, 7)
    results = []
    for chunk in (3, 1024):
        logits = base.to(dtype).requires_grad_(True)
        lp = token_logprobs(logits, ids, 0.7, chunk_size=chunk)
        ent = entropy_from_logits(logits, temperature=0.7, chunk_size=chunk)
        assert lp.dtype == ent.dtype == torch.float32 and lp.shape == ent.shape == (2, 7)
        ((lp * weights).sum() + ent.sum()).backward()
        results.append((lp.detach(), ent.detach(), logits.grad.float()))
    full = base.to(dtype).float() / 0.7
    ref_lp = torch.log_softmax(full, -1).gather(-1, ids[..., None]).squeeze(-1)
    ref_ent = -(torch.softmax(full, -1) * torch.log_softmax(full, -1)).sum(-1)
    for lp, ent, grad in results:
        assert torch.allclose(lp, ref_lp, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-5)
    assert torch.allclose(results[0][2], results[1][2], atol=1e-6)
    with pytest.raises(ValueError, match="share"):
        token_logprobs(base, ids[:, :3])


def test_chunked_logprob_gradient_is_exact_on_a_sliced_batch():
    torch.manual_seed(1)
    base = torch.randn(3, 6, 9, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, 9, (3, 5))
    # the trainer passes logits[:, :-1] (a non-contiguous view when B > 1); the pieces are computed in fp32
    w = torch.randn(3, 5, dtype=torch.float64)
    (token_logprobs(base[:, :-1], ids, 0.7, chunk_size=2) * w).sum().backward()
    ref = base.detach().clone().requires_grad_(True)
    full = torch.log_softmax(ref[:, :-1] / 0.7, -1).gather(-1, ids[..., None]).squeeze(-1)
    (full.float().double() * w).sum().backward()
    assert base.grad.dtype == torch.float64 and torch.allclose(base.grad, ref.grad, atol=1e-5)
    assert ref.grad.abs().max() > 0.1


def test_logprobs_and_entropy_in_one_pass_match_the_separate_functions():
    torch.manual_seed(2)
    base = torch.randn(3, 5, 11) * 2
    ids = torch.randint(0, 11, (3, 5))
    w = torch.randn(3, 5)
    ref = base.clone().requires_grad_(True)
    (token_logprobs(ref, ids, 0.8) * w).sum().backward()
    for chunk in (4, 1024):  # pieces of 4 positions cross rows of 5 (contiguous logits are one row of 15)
        logits = base.clone().requires_grad_(True)
        lp, ent = token_logprobs_and_entropy(logits, ids, 0.8, chunk_size=chunk)
        assert not ent.requires_grad and lp.shape == ent.shape == (3, 5)
        assert torch.allclose(lp, token_logprobs(base, ids, 0.8), atol=1e-6)
        assert torch.allclose(ent, entropy_from_logits(base, temperature=0.8), atol=1e-5)
        (lp * w).sum().backward()
        assert torch.allclose(logits.grad, ref.grad, atol=1e-6)
    assert token_logprobs_and_entropy(base, ids, entropy=False)[1].numel() == 0


def test_update_sums_are_the_metrics_as_token_sums():
    torch.manual_seed(3)
    logp, old = torch.randn(4, 6) * 0.5 - 2, torch.randn(4, 6) * 0.5 - 2
    adv = torch.tensor([1.0, -1.0, 0.5, -2.0])
    mask = (torch.rand(4, 6) > 0.3).float()
    entropy = torch.rand(4, 6)
    logp[0, 0], mask[0, 0] = float("nan"), 0.0  # masked: never read
    sums = update_sums(logp, old, adv, mask, entropy, 0.2, 0.28)
    fractions = clip_fractions(logp, old, adv, mask, 0.2, 0.28)
    tokens = int(mask.sum())
    assert sums["clip_low"] == round(fractions["low"] * tokens) and sums["clip_high"] == round(fractions["high"] * tokens)
    assert sums["clip_low"] + sums["clip_high"] > 0
    assert sums["entropy"] == pytest.approx(float(masked_sum(entropy, mask)), rel=1e-6)
    assert sums["ratio"] == pytest.approx(float(masked_sum(torch.exp(logp - old), mask)), rel=1e-6)
