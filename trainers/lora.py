"""LoRA for SFT and GRPO (peft): only low-rank adapters train; the base weights stay frozen.

Checkpoints hold the transformers model with the adapters injected (:func:`savable`): its
state is the base weights plus ``lora_A``/``lora_B``, which ``checkpoint_io.load_checkpoint`` loads
back into a freshly wrapped model, so a resumed run continues the same adapters. The final
model is merged (:func:`merged`): a plain transformers folder any backend (vLLM included) loads.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence


def wrap(model: Any, r: int, alpha: int, targets: Sequence[str]) -> Any:
    """``model`` with LoRA adapters of rank ``r`` on the ``targets`` modules (a peft ``PeftModel``)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ValueError("LoRA (sft --lora, grpo --lora-r) needs peft: pip install 'websailor-gym[lora]'") from None
    if r < 1 or alpha < 1 or not targets:
        raise ValueError(f"expected lora_r >= 1, lora_alpha >= 1 and target modules, got {r}, {alpha}, {list(targets)}")
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0, task_type="CAUSAL_LM")
    try:
        return get_peft_model(model, config)
    except ValueError as exc:
        raise ValueError(f"cannot put LoRA adapters on {list(targets)}: {exc}") from None


def is_lora(model: Any) -> bool:
    return callable(getattr(model, "merge_and_unload", None)) and hasattr(model, "base_model")


def savable(model: Any) -> Any:
    """The transformers model inside a ``PeftModel`` (adapters injected), else ``model`` itself."""
    return model.base_model.model if is_lora(model) else model


def merged(model: Any) -> Any:
    """A copy with the adapters merged into the weights (``model`` itself when it has none)."""
    return copy.deepcopy(model).merge_and_unload() if is_lora(model) else model
