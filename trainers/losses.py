"""The math of GRPO as small pure functions (no model, no environment, no state).

Shapes: ``B`` sequences (a batch laid out group after group: index ``i * G + j`` is
rollout ``j`` of task ``i``), ``T`` token positions, ``V`` vocabulary entries.
Masks are ``0``/``1`` tensors (any dtype) where ``1`` marks a token the policy sampled and
is trained on; ``0`` marks prompt, tool-response and padding tokens.

Every function that reads masked positions guarantees that those positions get exactly
zero gradient, even when their values are ``inf`` or ``nan`` (padding log-probabilities
are often ``0.0`` or ``-inf``): masked entries are selected away with ``torch.where``
before any arithmetic, not multiplied by zero afterwards (``0 * inf`` is ``nan``).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F

AdvantageMode = Literal["loo", "mean"]


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of ``x`` over positions where ``mask`` is set: ``(B, T), (B, T) -> ()``.

    Masked positions contribute exactly zero value and zero gradient, whatever they hold.
    """
    keep = mask.bool()
    return torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum()


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the set positions of ``mask``: ``(B, T), (B, T) -> ()``; ``0`` when none is set."""
    count = mask.bool().sum().clamp(min=1)
    return masked_sum(x, mask) / count


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    mode: AdvantageMode = "loo",
    scale_std: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Advantages from rewards laid out group after group: ``(B,) -> (B,)``, ``B = N * group_size``.

    - ``loo`` (leave-one-out, the default): ``A_i = r_i - mean(r_j, j != i)`` over the
      other ``G - 1`` rewards of the group, i.e. ``G / (G - 1) * (r_i - mean(r))``.
    - ``mean`` (WebSailor-V2 Eq. 3): ``A_i = r_i - mean(r)``.

    With ``scale_std`` the result is divided by the group's standard deviation (unbiased,
    as ``torch.std``) plus ``eps``. A group of one has no baseline to compare with and gets
    advantage ``0`` in both modes; a group whose rewards are all equal gets ``0`` everywhere
    (with or without std scaling). The result is detached from ``rewards``.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (B,), got shape {tuple(rewards.shape)}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if rewards.numel() % group_size != 0:
        raise ValueError(f"number of rewards ({rewards.numel()}) must be divisible by group_size ({group_size})")
    if mode not in ("loo", "mean"):
        raise ValueError(f"mode must be 'loo' or 'mean', got {mode!r}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    if group_size == 1:
        return torch.zeros(rewards.shape, dtype=out_dtype, device=rewards.device)
    r = rewards.detach().to(torch.float64).view(-1, group_size)
    centred = r - r.mean(dim=1, keepdim=True)
    adv = centred * (group_size / (group_size - 1)) if mode == "loo" else centred
    if scale_std:
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.view(-1).to(out_dtype)


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    *,
    normalizer: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Token-level clipped policy-gradient loss: ``(B, T), (B, T), (B,), (B, T) -> ()``.

    Per token ``t`` of sequence ``b``: ``ratio = exp(logprobs - old_logprobs)`` (importance
    ratio against the sampling policy) and
    ``l = -min(ratio * A_b, clip(ratio, 1 - clip_low, 1 + clip_high) * A_b)``; the loss is
    the sum of ``l`` over unmasked tokens divided by the number of unmasked tokens of the
    batch (every token weighs the same, whatever its sequence's length: DAPO's token-level
    mean). ``normalizer`` replaces that count when the batch is split into micro-batches or
    across processes: pass the token count of the whole batch (divided by the number of
    processes under DDP, which averages gradients) so the pieces add up to the full loss.

    Only ``logprobs`` should carry gradient; ``old_logprobs`` and ``advantages`` are
    treated as constants. No entropy bonus, no KL term (see :func:`kl_k3`).
    """
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and mask "
            f"{tuple(mask.shape)} must have the same (B, T) shape"
        )
    if advantages.shape != logprobs.shape[:1]:
        raise ValueError(f"advantages must have shape (B,) = ({logprobs.shape[0]},), got {tuple(advantages.shape)}")
    keep = mask.bool()
    zero = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    log_ratio = torch.where(keep, logprobs - old_logprobs.detach(), zero)
    ratio = torch.exp(log_ratio)
    adv = advantages.detach().to(logprobs.dtype).unsqueeze(1)
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = -torch.minimum(ratio * adv, clipped * adv)
    total = masked_sum(per_token, keep)
    if normalizer is None:
        normalizer = keep.sum().clamp(min=1)
    return total / normalizer


def clip_fractions(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
) -> dict[str, float]:
    """Share of unmasked tokens whose ratio is clipped: ``low`` (ratio below ``1 - clip_low``
    with a negative advantage), ``high`` (above ``1 + clip_high`` with a positive one),
    ``region`` (either). Inputs as :func:`policy_loss`; returns plain floats (for metrics)."""
    _, low, high, keep = _clipped(logprobs, old_logprobs, advantages, mask, clip_low, clip_high)
    n = max(int(keep.sum()), 1)
    return {"low": int(low.sum()) / n, "high": int(high.sum()) / n, "region": int((low | high).sum()) / n}


def _clipped(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
             clip_low: float, clip_high: float) -> tuple[torch.Tensor, ...]:
    """``(B, T)`` tensors: the importance ratio (1 where masked), and booleans clipped low, clipped high, unmasked."""
    with torch.no_grad():
        keep = mask.bool()
        ratio = torch.exp(torch.where(keep, logprobs - old_logprobs, torch.zeros_like(logprobs)))
        adv = advantages.unsqueeze(1)
        return ratio, (ratio < 1 - clip_low) & (adv < 0) & keep, (ratio > 1 + clip_high) & (adv > 0) & keep, keep


def update_sums(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                entropy: torch.Tensor, clip_low: float = 0.2, clip_high: float = 0.28) -> dict[str, float]:
    """The update's per-token metrics of one micro-batch as sums over unmasked tokens (they add over
    micro-batches and ranks; divide by the step's tokens): ``entropy``, ``ratio`` (the importance ratio
    against ``old_logprobs``), ``clip_low`` and ``clip_high`` (token counts, as :func:`clip_fractions`).
    Inputs as :func:`policy_loss`, ``entropy`` ``(B, T)``; one device-to-host copy for all of them."""
    with torch.no_grad():
        ratio, low, high, keep = _clipped(logprobs, old_logprobs, advantages, mask, clip_low, clip_high)
        values = torch.stack([masked_sum(entropy.float(), keep), masked_sum(ratio.float(), keep),
                              low.sum().float(), high.sum().float()]).tolist()
    return dict(zip(("entropy", "ratio", "clip_low", "clip_high"), values))


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token KL(policy || reference) estimate (Schulman's k3, always >= 0): ``(B, T), (B, T) -> (B, T)``.

    ``exp(ref - logp) - (ref - logp) - 1``; average it with :func:`masked_mean` and add
    ``beta`` times it to the loss for a KL penalty to a reference model.
    """
    d = ref_logprobs.detach() - logprobs
    return torch.exp(d) - d - 1.0


LOGPROB_CHUNK = 1024
"""Positions whose full-vocabulary fp32 values exist at once in :func:`token_logprobs` and
:func:`entropy_from_logits` (Qwen3's 152k vocabulary: about 600 MB per chunk in fp32)."""


def _pieces(shape: torch.Size, chunk_size: int) -> list[tuple[int, slice]]:
    """``(row, positions)`` pieces of a ``(B, T)`` grid, ``chunk_size`` positions each."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return [(b, slice(t, min(t + chunk_size, shape[1]))) for b in range(shape[0])
            for t in range(0, shape[1], chunk_size)]


def _as_3d(x: torch.Tensor) -> torch.Tensor:
    """``(B, T, V)`` view of ``(..., V)`` logits (a view, never a copy). Contiguous logits become one
    row of ``B * T`` positions, so that a piece spans rows: a batch of short sequences is a few pieces,
    not one per sequence (the per-piece Python and kernel launches dominated small batches)."""
    if x.is_contiguous():
        return x.view(1, -1, x.shape[-1])
    if x.dim() == 3:
        return x
    if x.dim() == 2:
        return x.unsqueeze(0)
    return x.reshape(1, -1, x.shape[-1])


class _ChunkedTokenLogprobs(torch.autograd.Function):
    """``log_softmax(logits / temperature)[ids]`` in fp32 pieces; the backward pass writes
    ``(onehot - softmax) * grad / temperature`` piece by piece into one gradient tensor (no fp32
    ``(B, T, V)`` tensor, no recomputed graph)."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, ids: torch.Tensor, temperature: float,
                chunk_size: int, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty(logits.shape[:2], dtype=torch.float32, device=logits.device)
        lse = torch.empty_like(out)
        entropy = torch.empty_like(out) if with_entropy else out.new_empty(0)
        for b, t in _pieces(logits.shape, chunk_size):
            x = logits[b, t].float()
            if temperature != 1.0:
                x = x / temperature
            lse[b, t] = torch.logsumexp(x, dim=-1)
            out[b, t] = x.gather(-1, ids[b, t].unsqueeze(-1)).squeeze(-1) - lse[b, t]
            if with_entropy:  # H = lse - sum(p * x), on the piece already in fp32 (no second pass over the logits)
                p = torch.exp(x - lse[b, t].unsqueeze(-1))
                entropy[b, t] = lse[b, t] - (p.mul_(x)).sum(-1)
        ctx.save_for_backward(logits, ids, lse)
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.mark_non_differentiable(entropy)
        return out, entropy

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor, _grad_entropy: torch.Tensor) -> tuple[torch.Tensor, None, None,
                                                                                       None, None]:
        logits, ids, lse = ctx.saved_tensors
        temperature = ctx.temperature
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        for b, t in _pieces(logits.shape, ctx.chunk_size):
            x = logits[b, t].float()
            if temperature != 1.0:
                x = x / temperature
            g = grad_out[b, t].float().unsqueeze(-1)
            piece = torch.exp(x - lse[b, t].unsqueeze(-1)).mul_(-g)
            piece.scatter_add_(-1, ids[b, t].unsqueeze(-1), g)
            if temperature != 1.0:
                piece.div_(temperature)
            grad[b, t] = piece.to(grad.dtype)
        return grad, None, None, None, None


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, temperature: float = 1.0, *,
                   chunk_size: int = LOGPROB_CHUNK) -> torch.Tensor:
    """Log-probability of each chosen token: logits ``(B, T, V)`` and ids ``(B, T)`` -> ``(B, T)`` fp32.

    ``logits[:, t]`` must be the distribution that produced ``token_ids[:, t]`` (shift the
    model's output by one before calling). Logits are divided by ``temperature`` first, so
    the result matches log-probabilities sampled at that temperature. Computed as
    ``gather - logsumexp`` in fp32, ``chunk_size`` positions at a time (across rows when the logits
    are contiguous), forward and backward (a custom autograd function): no fp32 ``(B, T, V)`` tensor, and no
    temperature-scaled copy of the logits, is ever materialised; only the logits themselves (in
    the model's dtype) and their gradient (same dtype).
    """
    return token_logprobs_and_entropy(logits, token_ids, temperature, chunk_size=chunk_size, entropy=False)[0]


def token_logprobs_and_entropy(logits: torch.Tensor, token_ids: torch.Tensor, temperature: float = 1.0, *,
                               chunk_size: int = LOGPROB_CHUNK,
                               entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`token_logprobs` and, from the same fp32 pieces, the entropy at each position (as
    :func:`entropy_from_logits`, without gradient): ``(B, T, V), (B, T) -> (B, T), (B, T)``. The update
    needs both; one pass over the full-vocabulary logits instead of two. ``entropy=False``: an empty one."""
    if logits.shape[:-1] != token_ids.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and token_ids {tuple(token_ids.shape)} must share (B, T)")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    x3 = _as_3d(logits)
    ids3 = token_ids.reshape(x3.shape[:2])
    logp, ent = _ChunkedTokenLogprobs.apply(x3, ids3, float(temperature), int(chunk_size), bool(entropy))
    return logp.view(token_ids.shape), (ent.view(token_ids.shape) if entropy else ent)


def entropy_from_logits(logits: torch.Tensor, *, temperature: float = 1.0,
                        chunk_size: int = LOGPROB_CHUNK) -> torch.Tensor:
    """Entropy of the categorical distribution at each position: ``(B, T, V) -> (B, T)`` (nats, fp32),
    of ``softmax(logits / temperature)``, ``chunk_size`` positions at a time (each
    piece checkpointed when gradients flow, so its fp32 intermediates are recomputed, not kept)."""

    def piece(x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if temperature != 1.0:
            x = x / temperature
        logp = F.log_softmax(x, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    x3 = _as_3d(logits)
    pieces = _pieces(x3.shape, chunk_size)
    if torch.is_grad_enabled() and logits.requires_grad:
        from torch.utils.checkpoint import checkpoint

        rows = [checkpoint(piece, x3[b, t], use_reentrant=False) for b, t in pieces]
        out = torch.cat(rows).view(x3.shape[:2]) if rows else torch.zeros(x3.shape[:2], device=logits.device)
    else:
        out = torch.zeros(x3.shape[:2], dtype=torch.float32, device=logits.device)
        for b, t in pieces:
            out[b, t] = piece(x3[b, t])
    return out.view(logits.shape[:-1])
