"""Mixed precision that learns: bf16 compute, fp32 master weights and optimizer state.

With bf16 *parameters*, an update smaller than half a bf16 ulp of a weight (about 0.4% of its
magnitude) rounds away: at lr 1e-6 a plain AdamW step leaves about 98% of the weights exactly as
they were. Here the parameters, their gradients and AdamW's moments stay fp32 (the master copy;
a model loaded in bf16 is upcast, which is exact) and the forward passes, rollouts included, run
under ``torch.autocast`` in bf16: matrix products and the activations kept for backward are bf16,
so compute and activation memory are those of bf16; the log-probabilities are then taken in fp32
(:mod:`trainers.losses`). Rollouts and the update run under the same autocast, so the sampling
log-probabilities and the trainer's agree up to kernel differences.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Literal

import torch

ComputeDtype = Literal["float32", "bfloat16"]


def master_weights(model: Any, dtype: ComputeDtype) -> Any:
    """``model`` with fp32 parameters when computing in ``bfloat16`` (bf16 values are exact in fp32)."""
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {dtype!r}")
    if any(p.is_floating_point() and p.dtype != torch.float32 for p in model.parameters()):
        model = model.float()
    return model


def autocast(device: torch.device | str, dtype: ComputeDtype) -> ContextManager:
    """bf16 autocast on ``device`` for ``bfloat16``; nothing for ``float32``."""
    if dtype == "float32":
        return contextlib.nullcontext()
    kind = torch.device(device).type
    return torch.autocast(device_type=kind, dtype=torch.bfloat16)
