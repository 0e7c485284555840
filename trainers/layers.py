"""Which weights train: the top decoder layers only.

:func:`trainable_top` freezes every weight but the top ``layers`` decoder layers and the final norm.
On CPU most of a step's time is the backward pass through the layers below; freezing them also
keeps the optimizer state (and so the checkpoint, :mod:`trainers.sft`) to the trained weights.
``websailor sft train --train-layers N`` and the main job's SFT and GRPO stages use it.
"""

from __future__ import annotations

from typing import Any


def decoder_layers(model: Any) -> Any:
    """The model's list of decoder layers (``model.model.layers``, as Llama, Qwen2 and SmolLM2 have), or None."""
    return getattr(getattr(model, "model", None), "layers", None)


def trainable_top(model: Any, layers: int) -> dict[str, int]:
    """Train only the top ``layers`` decoder layers and the final norm (0, or at least as many layers as the
    model has: every weight is left as it is); returns the parameter counts (``parameters``, ``trainable``)."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
        raise ValueError(f"layers must be an integer >= 0, got {layers!r}")
    total = sum(p.numel() for p in model.parameters())
    blocks = decoder_layers(model)
    if layers and blocks is None:
        raise ValueError(f"{type(model).__name__} has no model.layers: cannot train only its top {layers} layers")
    if layers and layers < len(blocks):
        for p in model.parameters():
            p.requires_grad_(False)
        for module in [*blocks[-layers:], getattr(model.model, "norm", None)]:
            for p in (module.parameters() if module is not None else ()):
                p.requires_grad_(True)
    return {"parameters": total, "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def frozen_names(model: Any) -> set[str]:
    """State-dict names of the parameters that do not train (tied weights under every name they have)."""
    return {name for name, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad}


def frozen_checksum(model: Any) -> float:
    """A checksum of the frozen weights (the sum of their absolute values, in float64): a resume that saved
    only the trained weights checks with it that it starts from the same model."""
    import torch

    with torch.no_grad():
        return float(sum(p.detach().double().abs().sum() for p in model.parameters() if not p.requires_grad))
