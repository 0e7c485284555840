"""Tiny causal language models built from a config, for CPU tests and benchmarks.

Nothing is downloaded: a small Qwen2 with random weights and, by default, the byte-level
``transformers.ByT5Tokenizer`` (no vocabulary file, no chat template, so the ChatML
fallback of :mod:`envs.tokens` applies), or any tokenizer passed in, such as the locally
trained subword tokenizer of :mod:`trainers.subword` (ChatML markers and protocol tags as
single tokens: sequences about 3.5x shorter than bytes). ``save_tiny_lm`` writes both to a
directory that :func:`trainers.models.load_lm` reads back, so the CLI can train one like any
local model.
"""

from __future__ import annotations

import os
from typing import Any


def tiny_lm(*, layers: int = 2, hidden: int = 64, heads: int = 4, seed: int = 0,
            max_positions: int = 32768, tokenizer: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: a ``layers``-layer Qwen2 of width ``hidden``, seeded, over bytes
    (``ByT5Tokenizer``) or over ``tokenizer``'s vocabulary (it needs an EOS token; padding
    falls back to EOS)."""
    import torch
    from transformers import ByT5Tokenizer, Qwen2Config, Qwen2ForCausalLM

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    tokenizer = ByT5Tokenizer() if tokenizer is None else tokenizer
    if not isinstance(getattr(tokenizer, "eos_token_id", None), int):
        raise ValueError(f"the tokenizer needs an EOS token (the end-of-turn stop), got {type(tokenizer).__name__} "
                         "without one")
    pad = tokenizer.pad_token_id if isinstance(tokenizer.pad_token_id, int) else tokenizer.eos_token_id
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=max_positions,
        tie_word_embeddings=True, pad_token_id=pad, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    return model, tokenizer


def save_tiny_lm(path: str | os.PathLike, **kwargs: Any) -> str:
    """Build a tiny model (``kwargs`` as :func:`tiny_lm`) and save it with its tokenizer to ``path``."""
    model, tokenizer = tiny_lm(**kwargs)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)
