"""Sampler/trainer mismatch: how far the rollout engine's log-probabilities are from the trainer's,
and truncated importance sampling (TIS) to correct for it. Pure functions on tensors.

With a separate rollout engine (vLLM: bf16 weights, its own kernels, batch-dependent reductions) the
log-probability the sampler gave a token, ``sampler_logp`` (kept in the trajectory), differs from the
one the trainer computes for the same token under the same weights, ``trainer_logp``. The update is then
slightly off-policy. Measured per trained token (``delta = trainer_logp - sampler_logp``):

- ``mean |delta|`` and ``max |delta|``;
- ``KL(sampler || trainer)`` estimated on the sampler's own samples with Schulman's k3,
  ``exp(delta) - delta - 1`` (>= 0, unbiased).

Truncated importance sampling (Yao et al., 2025, "Your efficient RL framework secretly brings you
off-policy RL training"): train with the trainer's log-probabilities as the old policy, and weigh each
token by ``w = min(exp(trainer_logp - sampler_logp), cap)`` (a constant), so that the gradient is the
on-policy one in expectation over the sampler's tokens, with the variance bounded by ``cap``.

The first-step check (:func:`check_first_step`, ``GRPOConfig.max_logprob_mismatch``) stops a run whose
sampler and trainer disagree by more than precision explains, before it trains off-policy for hours.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from trainers.losses import masked_sum
from wiki_sim.common.errors import UserError

DEFAULT_MAX_LOGPROB_MISMATCH = 0.2
"""Default ``GRPOConfig.max_logprob_mismatch``: the largest mean ``|trainer_logp - sampler_logp|`` over the first
step's trained tokens that passes the first-step check. What precision gives: on an H200, transformers' bf16
generation and a bf16 forward pass of the same tokens (a random Qwen3-0.6B) differed by 0.08 on average (0.40 at
most); in fp32 on a CPU they differ by about 1e-6. 0.2 is 2.5 times the bf16 figure and about the width of the
clip (``|log(1 - clip_low)|`` = 0.22 for the default 0.2): a mean beyond it puts a typical token's ratio at the
clip's edge, where its gradient is zeroed. Wrong tokens, a wrong temperature or an off-by-one alignment give
mean differences of 1 or more."""


class LogprobMismatch(UserError):
    """The first-step check failed: the sampler's log-probabilities are too far from the trainer's."""


def mismatch_sums(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """``(B, T), (B, T), (B, T) -> sums``: over tokens where ``mask`` is 1, ``abs`` (sum of
    ``|trainer_logp - sampler_logp|``), ``k3`` (sum of ``exp(d) - d - 1``, the KL(sampler || trainer)
    estimate), ``max`` (largest ``|d|``, 0 when no token) and ``tokens`` (their count). Sums add over
    micro-batches and ranks; divide by the total ``tokens`` for means."""
    if trainer_logp.shape != sampler_logp.shape or trainer_logp.shape != mask.shape:
        raise ValueError(f"trainer_logp {tuple(trainer_logp.shape)}, sampler_logp {tuple(sampler_logp.shape)} and "
                         f"mask {tuple(mask.shape)} must have the same (B, T) shape")
    with torch.no_grad():
        keep = mask.bool()
        d = torch.where(keep, trainer_logp.detach().float() - sampler_logp.float(), torch.zeros((), device=mask.device))
        absd = d.abs()
        return {"abs": float(absd.sum()), "k3": float(masked_sum(torch.expm1(d) - d, keep)),
                "max": float(absd.max()) if keep.any() else 0.0, "tokens": float(keep.sum())}


def tis_weights(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """``(B, T), (B, T) -> (B, T)``: ``min(exp(trainer_logp - sampler_logp), cap)``, no gradient.
    ``cap`` > 0 (usually 2 to 10): larger tokens' ratios are truncated to it."""
    if not cap > 0:
        raise ValueError(f"the TIS cap must be > 0, got {cap}")
    with torch.no_grad():
        return torch.exp(trainer_logp.detach().float() - sampler_logp.float()).clamp(max=cap)


def tis_policy_loss(logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, advantages: torch.Tensor,
                    mask: torch.Tensor, cap: float, clip_low: float = 0.2, clip_high: float = 0.28, *,
                    normalizer: float | torch.Tensor | None = None) -> torch.Tensor:
    """The clipped token-level loss of :func:`trainers.losses.policy_loss` with the trainer's own
    log-probabilities as the old policy, each token weighted by :func:`tis_weights`:
    ``(B, T), (B, T), (B,), (B, T) -> ()``.

    Per token: ``ratio = exp(logprobs - logprobs.detach())`` (1 in value: one optimizer step per
    rollout batch, so the old policy is the current one; the clip keeps its meaning for callers that
    take several steps), ``l = -w * min(ratio * A, clip(ratio) * A)``, ``w = min(exp(logprobs -
    sampler_logprobs), cap)`` (constant). Summed over unmasked tokens and divided by their count, or
    by ``normalizer`` (as in ``policy_loss``). Only ``logprobs`` carries gradient.
    """
    if logprobs.shape != sampler_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(f"logprobs {tuple(logprobs.shape)}, sampler_logprobs {tuple(sampler_logprobs.shape)} and "
                         f"mask {tuple(mask.shape)} must have the same (B, T) shape")
    if advantages.shape != logprobs.shape[:1]:
        raise ValueError(f"advantages must have shape (B,) = ({logprobs.shape[0]},), got {tuple(advantages.shape)}")
    keep = mask.bool()
    zero = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    w = torch.where(keep, tis_weights(logprobs, sampler_logprobs, cap).to(logprobs.dtype), zero)
    ratio = torch.exp(torch.where(keep, logprobs - logprobs.detach(), zero))
    adv = advantages.detach().to(logprobs.dtype).unsqueeze(1)
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = -w * torch.minimum(ratio * adv, clipped * adv)
    total = masked_sum(per_token, keep)
    if normalizer is None:
        normalizer = keep.sum().clamp(min=1)
    return total / normalizer


def accumulate(sums: dict[str, float], trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
               tis_cap: float = 0.0) -> float:
    """Add one micro-batch's :func:`mismatch_sums` to ``sums`` (keys ``mm_abs``, ``mm_k3``, and with
    ``tis_cap > 0`` ``tis_weight``, the sum of :func:`tis_weights`, and ``tis_capped``, the tokens at the
    cap); returns its largest ``|delta|`` (maxima do not add)."""
    found = mismatch_sums(trainer_logp, sampler_logp, mask)
    sums["mm_abs"] += found["abs"]
    sums["mm_k3"] += found["k3"]
    if tis_cap > 0:
        w = tis_weights(trainer_logp, sampler_logp, tis_cap)
        sums["tis_weight"] += float(masked_sum(w, mask))
        sums["tis_capped"] += float(((w >= tis_cap) & mask.bool()).sum())
    return found["max"]


def metrics(sums: dict[str, float], tokens: float, worst: float, tis_cap: float = 0.0) -> dict[str, float]:
    """The step's ``mismatch/*`` metrics from the summed ``sums`` over ``tokens`` trained tokens."""
    n = max(tokens, 1.0)
    out = {"mismatch/abs_mean": sums["mm_abs"] / n, "mismatch/abs_max": worst, "mismatch/kl_k3": sums["mm_k3"] / n}
    if tis_cap > 0:
        out.update({"mismatch/tis_weight_mean": sums["tis_weight"] / n,
                    "mismatch/tis_capped_frac": sums["tis_capped"] / n})
    return out


def check_first_step(step_metrics: Mapping[str, float], threshold: float | None, *, tis_cap: float = 0.0,
                     dtype: str = "float32", rollout_engine: str = "hf") -> str | None:
    """The first-step check on one step's ``mismatch/*`` metrics (those of :func:`metrics`).

    Passes (returns ``None``) when the check is off (``threshold`` None or 0), when the step trained no
    token (no ``mismatch/abs_mean``), when the mean is not finite (a non-finite step is skipped and counted
    by the trainer) or when ``mismatch/abs_mean <= threshold``. Otherwise the message says by how much and
    names the settings to change (``--dtype``, ``--rollout-engine``, ``--tis-cap``,
    ``--max-logprob-mismatch``): with importance-sampling correction on (``tis_cap > 0``), which corrects
    for the mismatch, it is returned as a warning; without, it is raised as :class:`LogprobMismatch`
    (one line)."""
    if not threshold or "mismatch/abs_mean" not in step_metrics:
        return None
    mean = float(step_metrics["mismatch/abs_mean"])
    if not math.isfinite(mean) or mean <= threshold:
        return None
    worst = float(step_metrics.get("mismatch/abs_max", mean))
    found = (f"the sampler's and the trainer's log-probabilities of the first step's tokens differ by {mean:.3g} "
             f"on average (max {worst:.3g}), above max_logprob_mismatch={threshold:g} (bf16 gives about 0.08, "
             f"fp32 about 1e-6; now --dtype {dtype}, --rollout-engine {rollout_engine}, --tis-cap {tis_cap:g})")
    if tis_cap > 0:
        return f"warning: {found}; training on with importance-sampling correction (--tis-cap {tis_cap:g})"
    raise LogprobMismatch(f"{found}: the rollouts would train off-policy. Compute in --dtype float32, sample "
                          f"with --rollout-engine hf (the trained model itself), or correct with --tis-cap 2; "
                          f"--max-logprob-mismatch raises the limit (0: no check)")
