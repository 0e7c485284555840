"""Counting the transcript's tokens for the context budget.

With a tokenizer (anything with ``encode(text)``: a ``transformers`` tokenizer, a
``tiktoken`` encoding, or a plain callable returning token ids or a count), each message
is counted as its ChatML rendering ``<|im_start|>role\\ncontent<|im_end|>\\n`` without
special tokens added. ChatML's ``<|im_start|>``/``<|im_end|>`` are single special tokens
in Qwen tokenizers, so no token spans two messages and the sum over messages equals the
count of the whole transcript; each message is counted once, when it is added.

Without a tokenizer the count is an estimate, :func:`estimate_tokens`: one token per 4
ASCII characters (rounded up) plus one per other character, plus 4 per message for the
ChatML framing. English prose with BPE tokenizers of the Qwen/Llama/GPT-4 kind runs at
about 4 characters per token; CJK and other non-ASCII text at 1-1.5 characters per
token, so the estimate errs on the high side there, which keeps the budget safe.
"""

from __future__ import annotations

from typing import Any, Callable

MESSAGE_OVERHEAD = 4
"""Estimated tokens of ChatML framing per message (``<|im_start|>``, role, newline, ``<|im_end|>``)."""


def estimate_tokens(text: str) -> int:
    """Documented estimate: ceil(ASCII characters / 4) + non-ASCII characters."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    other = len(text) - ascii_chars
    return -(-ascii_chars // 4) + other


class TokenCounter:
    """Counts a message's tokens with the user's tokenizer, or estimates them."""

    def __init__(self, tokenizer: Any = None):
        if tokenizer is not None and not (hasattr(tokenizer, "encode") or callable(tokenizer)):
            raise ValueError(
                f"tokenizer must have an encode(text) method or be callable, got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.exact = tokenizer is not None
        self._encode: Callable[[str], Any] | None = None
        if tokenizer is not None:
            self._encode = self._pick_encode(tokenizer)

    @staticmethod
    def _pick_encode(tokenizer: Any) -> Callable[[str], Any]:
        encode = getattr(tokenizer, "encode", None)
        if encode is None:
            return tokenizer
        try:  # transformers tokenizers: no BOS/EOS inside the transcript
            encode("probe", add_special_tokens=False)
            return lambda text: encode(text, add_special_tokens=False)
        except TypeError:
            pass
        try:  # tiktoken: the ChatML markers are written as text here, allow them
            encode("probe", disallowed_special=())
            return lambda text: encode(text, disallowed_special=())
        except TypeError:
            return encode

    def message_tokens(self, role: str, content: str) -> int:
        """Tokens of one message, framing included."""
        if self._encode is None:
            return estimate_tokens(content) + estimate_tokens(role) + MESSAGE_OVERHEAD
        ids = self._encode(f"<|im_start|>{role}\n{content}<|im_end|>\n")
        return int(ids) if isinstance(ids, int) else len(ids)
