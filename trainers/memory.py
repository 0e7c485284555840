"""Memory of the update: micro-batches by a token budget and gradient checkpointing.

The update's activation memory grows with the padded tokens of a forward pass (rows times the
longest row), not with the number of trajectories: 8 short episodes and one 16k-token episode
differ a thousandfold. :func:`micro_batches` therefore cuts a step's batch into contiguous row
ranges whose padded size stays within a token budget. Log-probabilities and entropies are
computed in chunks (:mod:`trainers.losses`), so the full-vocabulary part stays bounded too.
"""

from __future__ import annotations

from typing import Any, Sequence


def budget_slices(lengths: Sequence[int], max_rows: int, max_tokens: int = 0) -> list[slice]:
    """Contiguous row ranges covering ``range(len(lengths))``: at most ``max_rows`` rows each and,
    when ``max_tokens > 0``, at most ``max_tokens`` padded tokens (rows x longest row). A row longer
    than ``max_tokens`` on its own is a range of its own (a sequence is never split)."""
    if max_rows < 1 or max_tokens < 0:
        raise ValueError(f"expected max_rows >= 1 and max_tokens >= 0, got {max_rows} and {max_tokens}")
    out: list[slice] = []
    start, longest = 0, 0
    for i, n in enumerate(lengths):
        wider = max(longest, int(n))
        rows = i - start + 1
        if i > start and (rows > max_rows or (max_tokens and rows * wider > max_tokens)):
            out.append(slice(start, i))
            start, wider = i, int(n)
        longest = wider
    if len(lengths):
        out.append(slice(start, len(lengths)))
    return out


def batch_slices(batch: Any, max_rows: int, max_tokens: int = 0) -> list[slice]:
    """:func:`budget_slices` over a :class:`trainers.grpo_data.TrainBatch` (row lengths from its attention mask)."""
    return budget_slices(batch.attention_mask.sum(1).tolist(), max_rows, max_tokens)


def enable_gradient_checkpointing(model: Any) -> None:
    """Recompute each layer's activations in the backward pass (transformers models; non-reentrant,
    so it works with DDP and with inputs that need no gradient). Training then keeps one layer's
    activations at a time instead of all of them; generation is unaffected (eval mode keeps the KV cache)."""
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5 (the old name is deprecated)
    if callable(enable):
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
        return
    enable = getattr(model, "gradient_checkpointing_enable", None)
    if not callable(enable):
        raise ValueError(f"gradient_checkpointing needs a transformers model with gradient_checkpointing_enable, "
                         f"got {type(model).__name__}")
    enable(gradient_checkpointing_kwargs={"use_reentrant": False})
