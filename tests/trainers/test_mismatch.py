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


# ------------------------------------------------------ the first-step check (GRPOConfig.max_logprob_mismatch)

def test_check_first_step_passes_warns_or_raises():
    from trainers.mismatch import DEFAULT_MAX_LOGPROB_MISMATCH, LogprobMismatch, check_first_step
    from wiki_sim.common.errors import UserError

    bf16 = {"mismatch/abs_mean": 0.08, "mismatch/abs_max": 0.40}  # what bf16 gave on an H200
    assert check_first_step(bf16, DEFAULT_MAX_LOGPROB_MISMATCH) is None
    assert check_first_step({"mismatch/abs_mean": 1e-6, "mismatch/abs_max": 1e-5}, 0.2) is None
    off = {"mismatch/abs_mean": 1.3, "mismatch/abs_max": 4.0}
    for threshold in (None, 0, 0.0):
        assert check_first_step(off, threshold) is None  # no check
    assert check_first_step({"train/tokens": 0}, 0.2) is None  # nothing trained: nothing to compare
    assert check_first_step({"mismatch/abs_mean": math.nan}, 0.2) is None  # a non-finite step is skipped elsewhere
    with pytest.raises(LogprobMismatch) as err:
        check_first_step(off, 0.2, dtype="bfloat16", rollout_engine="vllm")
    message = str(err.value)
    assert isinstance(err.value, UserError) and "\n" not in message
    assert "1.3" in message and "4" in message and "0.2" in message
    for setting in ("--dtype", "--rollout-engine", "--tis-cap", "--max-logprob-mismatch"):
        assert setting in message
    note = check_first_step(off, 0.2, tis_cap=2.0, rollout_engine="vllm")
    assert note.startswith("warning: ") and "--tis-cap 2" in note and "\n" not in note


def test_max_logprob_mismatch_is_validated():
    from trainers.grpo import GRPOConfig

    assert GRPOConfig(model="m", tasks="t").max_logprob_mismatch == 0.2
    assert GRPOConfig(model="m", tasks="t", max_logprob_mismatch=None).max_logprob_mismatch is None
    assert GRPOConfig(model="m", tasks="t", max_logprob_mismatch=0).max_logprob_mismatch == 0
    for bad in (-0.1, math.inf, math.nan, "0.2", True):
        with pytest.raises(ValueError, match="max_logprob_mismatch"):
            GRPOConfig(model="m", tasks="t", max_logprob_mismatch=bad)


def _trainer(tmp_path, shift: float, shift_steps=(1,), **kw):
    """A GRPO trainer on the toy environment (fp32, CPU) whose rollouts report each sampled token's
    log-probability ``shift`` lower than the policy sampled it on the steps in ``shift_steps``."""
    from tests.trainers import toy_env
    from trainers.grpo import GRPOConfig, GRPOTrainer

    class OffPolicy(GRPOTrainer):
        def collect(self, tasks):
            trajectories = super().collect(tasks)
            for i, t in enumerate(trajectories):
                t.reward, t.is_correct = float(i % 2), bool(i % 2)  # signal, whatever a random model answered
                if self.step in shift_steps:
                    t.logprobs = [lp - shift if m else lp for lp, m in zip(t.logprobs, t.loss_mask)]
            return trajectories

    torch.manual_seed(0)
    tok = toy_env.toy_tokenizer("byte")
    base = dict(model="-", tasks="-", output_dir=str(tmp_path / "run"), env_id=toy_env.SPEC, batch_size=4,
                group_size=2, micro_batch_size=4, pool_size=2, device="cpu", tensorboard="off", learning_rate=1e-3,
                max_new_tokens=8, exclude_truncated=False, save_every=0, steps=2)
    base.update(kw)
    return OffPolicy(GRPOConfig(**base), toy_env.tiny_model(tok, hidden=32), tok, toy_env.TASKS[:2])


def test_an_honest_sampler_passes_the_first_step_check(tmp_path, capsys):
    trainer = _trainer(tmp_path, shift=0.0)
    metrics = trainer.train_step()
    assert metrics["train/tokens"] > 0 and metrics["mismatch/abs_mean"] < 1e-4  # fp32 on CPU: the same numbers
    assert trainer._mismatch_checked and "warning" not in capsys.readouterr().out


def test_a_sampler_whose_logprobs_are_off_stops_the_first_step_in_one_line(tmp_path):
    from trainers.mismatch import LogprobMismatch

    trainer = _trainer(tmp_path, shift=0.5)
    with pytest.raises(LogprobMismatch, match=r"differ by 0\.5 on average .*--dtype float32.*--rollout-engine hf"
                                              r".*--tis-cap 2") as err:
        trainer.train()
    assert "\n" not in str(err.value) and "now --dtype float32, --rollout-engine hf, --tis-cap 0" in str(err.value)
    assert trainer.step == 1 and not any((tmp_path / "run").glob("checkpoint-*"))  # nothing saved


def test_only_the_first_step_that_trains_is_checked(tmp_path):
    trainer = _trainer(tmp_path, shift=0.5, shift_steps=(2,))
    trainer.train_step()
    assert trainer.train_step()["mismatch/abs_mean"] == pytest.approx(0.5, abs=1e-3)  # measured, not checked


def test_with_importance_sampling_correction_it_warns_and_trains_on(tmp_path, capsys):
    trainer = _trainer(tmp_path, shift=0.5, tis_cap=2.0)
    metrics = trainer.train_step()
    assert metrics["train/skipped"] == 0 and metrics["mismatch/abs_mean"] == pytest.approx(0.5, abs=1e-3)
    lines = [line for line in capsys.readouterr().out.splitlines() if "max_logprob_mismatch" in line]
    assert len(lines) == 1 and lines[0].startswith("grpo: step 1: warning: ") and "--tis-cap 2" in lines[0]


def test_the_check_can_be_turned_off(tmp_path):
    metrics = _trainer(tmp_path, shift=0.5, max_logprob_mismatch=None).train_step()  # 0 too: see the unit test
    assert metrics["mismatch/abs_mean"] == pytest.approx(0.5, abs=1e-3)
