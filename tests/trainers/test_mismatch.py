"""The sampler/trainer mismatch measures and truncated importance sampling, by hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from trainers.losses import policy_loss
from trainers.mismatch import mismatch_sums, tis_policy_loss, tis_weights


def test_mismatch_sums_by_hand():
    trainer = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, -9.0]])
    sampler = torch.tensor([[-1.5, -2.0, -0.1], [-2.0, -9.0, -1.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])  # (1, 1) and (1, 2) are tool responses or padding
    out = mismatch_sums(trainer, sampler, mask)
    d = [0.5, 0.0, -0.4, -1.0]
    assert out["tokens"] == 4
    assert out["abs"] == pytest.approx(1.9)
    assert out["max"] == pytest.approx(1.0)  # not the masked 8.0
    assert out["k3"] == pytest.approx(sum(math.exp(x) - x - 1 for x in d), rel=1e-6)
    assert mismatch_sums(trainer, sampler, torch.zeros_like(mask)) == {"abs": 0.0, "k3": 0.0, "max": 0.0,
                                                                       "tokens": 0.0}
    with pytest.raises(ValueError, match="same"):
        mismatch_sums(trainer, sampler[:, :2], mask)


def test_tis_weights_are_capped_ratios_without_gradient():
    trainer = torch.tensor([[math.log(0.5), math.log(0.9)]], requires_grad=True)
    sampler = torch.tensor([[math.log(0.25), math.log(0.1)]])
    w = tis_weights(trainer, sampler, cap=3.0)
    assert w[0].tolist() == pytest.approx([2.0, 3.0])  # 0.5/0.25 = 2; 0.9/0.1 = 9 capped at 3
    assert not w.requires_grad
    with pytest.raises(ValueError, match="cap"):
        tis_weights(trainer, sampler, cap=0.0)


def test_tis_loss_value_and_gradient():
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.7, -0.2, -3.0]], requires_grad=True)
    sampler = torch.tensor([[-1.0, -2.0 - math.log(2), -0.5 + math.log(4)], [-0.7 + 1.0, -0.2, 0.0]])
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    loss = tis_policy_loss(logp, sampler, adv, mask, cap=1.5)
    # weights: row 0: 1, 2 -> 1.5 (capped), 1/4; row 1: e^-1, 1, (masked)
    w = torch.tensor([[1.0, 1.5, 0.25], [math.exp(-1.0), 1.0, 0.0]])
    expected = -(w * adv[:, None] * mask).sum() / 5  # ratio 1 in value
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)
    loss.backward()
    assert torch.allclose(logp.grad, -w * adv[:, None] * mask / 5, atol=1e-6)


def test_tis_with_a_sampler_equal_to_the_trainer_is_the_on_policy_loss():
    torch.manual_seed(0)
    logp = (torch.randn(3, 5) - 2).requires_grad_()
    adv, mask = torch.tensor([0.5, -1.0, 2.0]), (torch.rand(3, 5) > 0.3).float()
    a = tis_policy_loss(logp, logp.detach(), adv, mask, cap=2.0, normalizer=7.0)
    (ga,) = torch.autograd.grad(a, logp)
    b = policy_loss(logp, logp.detach(), adv, mask, normalizer=7.0)
    (gb,) = torch.autograd.grad(b, logp)
    assert float(a) == pytest.approx(float(b)) and torch.allclose(ga, gb)
