"""Token in, token out: transcripts as token ids and loss masks, for trainers.

Pure functions over a tokenizer (anything ``transformers``-like: ``encode(text,
add_special_tokens=False)``, optionally ``chat_template`` and ``apply_chat_template``).
Nothing here imports an environment.

**Template.** When the tokenizer has a chat template it is used; otherwise the documented
ChatML fallback, the format the environments speak::

    <|im_start|>{role}\\n{content}<|im_end|>\\n

(no default system message, nothing else). With the fallback, ``<|im_start|>`` and
``<|im_end|>`` are encoded as whatever the tokenizer makes of them: single special tokens
in Qwen tokenizers, ten bytes each in ``transformers.ByT5Tokenizer``.

**Segments.** The transcript is tokenized piece by piece, never as one string: the
non-assistant text up to and including each assistant header (``<|im_start|>assistant\\n``),
then each assistant body. This is what the model sees at inference time (the generation
prompt is tokenized before the model samples the body), so a trainer's ids match a
rollout's. With a chat template the pieces are found by rendering prefixes of the
transcript: the template must be *prefix-stable* (rendering ``messages[:i+1]`` starts with
the rendering of ``messages[:i]``); templates that rewrite earlier turns (Qwen3 drops the
thoughts of earlier turns) raise ``ValueError``; pass ``use_chat_template=False`` to use the
fallback for those.

**Loss mask.** 1 exactly on the assistant body (its content and the end-of-turn marker
that closes it, ``<|im_end|>`` in ChatML), 0 on system, user and tool-response tokens, on
role headers, and on the whitespace a template puts after the end-of-turn marker (the
``\\n`` after ``<|im_end|>``: the model stops at the marker and the environment adds the
newline, see :func:`observation_ids`).

**Rollouts** never re-tokenize sampled text. They start from :func:`prompt_ids`, append
the sampled ids (loss 1), and after each turn append :func:`observation_ids` (loss 0),
the environment's own text: ``\\n<|im_start|>user\\n{content}<|im_end|>\\n<|im_start|>assistant\\n``
in ChatML. A turn cut off before its end-of-turn marker is closed with
:func:`end_of_turn_ids` first (loss 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

import torch

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"


def chatml(role: str, content: str) -> str:
    """One message in the documented ChatML fallback: ``<|im_start|>{role}\\n{content}<|im_end|>\\n``."""
    return f"{IM_START}{role}\n{content}{IM_END}\n"


@dataclass(frozen=True)
class TokenizedTranscript:
    """A transcript as token ids with a loss mask."""

    input_ids: torch.Tensor
    """``(T,)`` int64: the token ids of the whole transcript."""
    loss_mask: torch.Tensor
    """``(T,)`` int64: 1 on assistant body tokens (content and closing end-of-turn marker), 0 elsewhere."""

    def __post_init__(self) -> None:
        if self.input_ids.shape != self.loss_mask.shape or self.input_ids.dim() != 1:
            raise ValueError(f"input_ids and loss_mask must both have shape (T,), got "
                             f"{tuple(self.input_ids.shape)} and {tuple(self.loss_mask.shape)}")


def encode(text: str, tokenizer: Any) -> list[int]:
    """``text`` as token ids, without BOS/EOS or other special tokens added."""
    if not text:
        return []
    return list(tokenizer.encode(text, add_special_tokens=False))


def has_chat_template(tokenizer: Any) -> bool:
    """True when ``tokenizer`` carries a chat template that :func:`tokenize_messages` will use."""
    return bool(getattr(tokenizer, "chat_template", None)) and callable(getattr(tokenizer, "apply_chat_template", None))


TemplateSwitch = Literal["auto", "on", "off"]
"""The command-line form of ``use_chat_template``: ``auto`` (``None``), ``on`` (``True``), ``off`` (``False``)."""


def template_switch(mode: TemplateSwitch) -> bool | None:
    """``use_chat_template`` for a :data:`TemplateSwitch` value."""
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"chat_template must be one of ['auto', 'on', 'off'], got {mode!r}")
    return {"auto": None, "on": True, "off": False}[mode]


def template_name(tokenizer: Any) -> str:
    """A name for the tokenizer's chat template, for error messages: the family recognised from
    its text (Qwen3 thinking, Llama 3, ChatML) and the tokenizer's ``name_or_path`` when set."""
    text = str(getattr(tokenizer, "chat_template", "") or "")
    if "enable_thinking" in text and "reasoning_content" in text:
        family = "Qwen3 thinking template"
    elif "<|start_header_id|>" in text:
        family = "Llama 3 template"
    elif IM_START in text:
        family = "ChatML-style template"
    else:
        family = "chat template"
    where = getattr(tokenizer, "name_or_path", "") or ""
    return f"the {family} of {where}" if where else f"the tokenizer's {family}"


def _switch_hint(tokenizer: Any) -> str:
    return (f"{template_name(tokenizer)} cannot give exact training ids here; pass use_chat_template=False "
            "(on the command line: --chat-template off) to use the ChatML fallback")


def _use_template(tokenizer: Any, use_chat_template: bool | None) -> bool:
    if use_chat_template is None:
        return has_chat_template(tokenizer)
    if use_chat_template and not has_chat_template(tokenizer):
        raise ValueError("use_chat_template=True but the tokenizer has no chat_template")
    return bool(use_chat_template)


def _check_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}]: expected a dict with string 'role' and 'content', got {m!r:.200}")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _render(tokenizer: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def _strip_prefix(text: str, prefix: str, what: str, tokenizer: Any = None) -> str:
    if not text.startswith(prefix):
        raise ValueError(f"the chat template is not prefix-stable: {what} does not start with the rendering "
                         f"of the messages before it (the template rewrites earlier turns): "
                         f"{_switch_hint(tokenizer)}")
    return text[len(prefix):]


def _segments(messages: list[dict[str, str]], tokenizer: Any, template: bool,
              add_generation_prompt: bool) -> list[tuple[str, int]]:
    """``(text, mask)`` pieces whose concatenation is the rendered transcript."""
    pieces: list[tuple[str, int]] = []
    if not template:
        for m in messages:
            if m["role"] == "assistant":
                pieces += [(f"{IM_START}assistant\n", 0), (m["content"] + IM_END, 1), ("\n", 0)]
            else:
                pieces.append((chatml(m["role"], m["content"]), 0))
        if add_generation_prompt:
            pieces.append((f"{IM_START}assistant\n", 0))
        return pieces
    done = ""
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and i == 0:
            raise ValueError("with a chat template the transcript must not start with an assistant message")
        if m["role"] == "assistant":
            header = _strip_prefix(_render(tokenizer, messages[:i], True), done,
                                   f"the generation prompt before message {i}", tokenizer)
            full = _render(tokenizer, messages[: i + 1], False)
            body = _strip_prefix(full, done + header, f"the rendering up to message {i}", tokenizer)
            trained = body.rstrip()
            pieces += [(header, 0), (trained, 1), (body[len(trained):], 0)]
        else:
            full = _render(tokenizer, messages[: i + 1], False)
            pieces.append((_strip_prefix(full, done, f"the rendering up to message {i}", tokenizer), 0))
        done = full
    if add_generation_prompt:
        full = _render(tokenizer, messages, True)
        pieces.append((_strip_prefix(full, done, "the generation prompt", tokenizer), 0))
    return pieces


def tokenize_messages(messages: Sequence[Mapping[str, Any]], tokenizer: Any, *,
                      add_generation_prompt: bool = False,
                      use_chat_template: bool | None = None) -> TokenizedTranscript:
    """A ChatML transcript as ``input_ids (T,)`` and ``loss_mask (T,)``.

    Args:
        messages: ``[{"role", "content"}, ...]`` (extra keys are ignored).
        tokenizer: a ``transformers`` tokenizer (or anything with the same ``encode``).
        add_generation_prompt: append the assistant header that opens the next turn (mask 0).
        use_chat_template: ``None`` uses the tokenizer's template when it has one; ``False``
            forces the ChatML fallback; ``True`` requires a template.
    """
    messages = _check_messages(messages)
    template = _use_template(tokenizer, use_chat_template)
    ids: list[int] = []
    mask: list[int] = []
    for text, m in _segments(messages, tokenizer, template, add_generation_prompt):
        piece = encode(text, tokenizer)
        ids += piece
        mask += [m] * len(piece)
    return TokenizedTranscript(torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long))


def prompt_ids(messages: Sequence[Mapping[str, Any]], tokenizer: Any, *,
               use_chat_template: bool | None = None) -> list[int]:
    """The ids a rollout starts from: the transcript so far followed by the generation prompt."""
    return tokenize_messages(messages, tokenizer, add_generation_prompt=True,
                             use_chat_template=use_chat_template).input_ids.tolist()


_PROBE_ANSWER = "probe answer 7f3a"
_PROBE = [{"role": "user", "content": "probe question"}, {"role": "assistant", "content": _PROBE_ANSWER}]


def _after_probe_answer(rendered: str, tokenizer: Any) -> str:
    """The rendering after the probe's assistant answer (its end-of-turn marker onwards). The
    answer is located rather than the prefix compared, so templates that rewrite what comes
    before it (Qwen3 adds an empty think block to the last turn) still give their markers."""
    at = rendered.find(_PROBE_ANSWER)
    if at < 0:
        raise ValueError(f"cannot find the end-of-turn marker: the template does not render the assistant "
                         f"content as given: {_switch_hint(tokenizer)}")
    return rendered[at + len(_PROBE_ANSWER):]


def _observation_text(content: str, tokenizer: Any, template: bool, role: str) -> str:
    if not template:
        return f"\n{IM_START}{role}\n{content}{IM_END}\n{IM_START}assistant\n"
    marker = end_of_turn_text(tokenizer, use_chat_template=True)
    full = _after_probe_answer(_render(tokenizer, [*_PROBE, {"role": role, "content": content}], True), tokenizer)
    if not full.startswith(marker):
        raise ValueError(f"the rendering with an observation does not close the assistant turn with "
                         f"{marker!r}: {_switch_hint(tokenizer)}")
    return full[len(marker):]


def generation_prompt_ids(tokenizer: Any, *, use_chat_template: bool | None = None) -> list[int]:
    """The assistant header that opens a turn (``<|im_start|>assistant\\n`` in ChatML)."""
    if not _use_template(tokenizer, use_chat_template):
        return encode(f"{IM_START}assistant\n", tokenizer)
    user = _PROBE[:1]
    return encode(_strip_prefix(_render(tokenizer, user, True), _render(tokenizer, user, False),
                                "the generation prompt", tokenizer), tokenizer)


def observation_ids(content: str, tokenizer: Any, *, role: str = "user",
                    use_chat_template: bool | None = None) -> list[int]:
    """What the environment adds after an assistant turn that ended with its end-of-turn
    marker: ``\\n<|im_start|>user\\n{content}<|im_end|>\\n<|im_start|>assistant\\n`` in ChatML
    (with a template: the template's text between that marker and the next generation prompt)."""
    if not isinstance(content, str):
        raise ValueError(f"content must be a string, got {type(content).__name__}")
    return encode(_observation_text(content, tokenizer, _use_template(tokenizer, use_chat_template), role), tokenizer)


def end_of_turn_text(tokenizer: Any, *, use_chat_template: bool | None = None) -> str:
    """The marker that closes an assistant turn (``<|im_end|>`` in ChatML, ``<|eot_id|>`` in Llama 3)."""
    if not _use_template(tokenizer, use_chat_template):
        return IM_END
    marker = _after_probe_answer(_render(tokenizer, _PROBE, False), tokenizer).rstrip()
    if not marker:
        raise ValueError(f"cannot find the end-of-turn marker: the template puts nothing after the assistant "
                         f"content: {_switch_hint(tokenizer)}")
    return marker


def end_of_turn_ids(tokenizer: Any, *, use_chat_template: bool | None = None) -> list[int]:
    """Ids of :func:`end_of_turn_text`: a rollout adds them (loss 0) when a turn was cut off
    before the model sampled them."""
    return encode(end_of_turn_text(tokenizer, use_chat_template=use_chat_template), tokenizer)


def stop_sequences(tokenizer: Any, *, use_chat_template: bool | None = None) -> list[list[int]]:
    """Id sequences that end an assistant turn: the end-of-turn marker's ids (one token in
    Qwen tokenizers, several bytes in ByT5), and the tokenizer's EOS token if it has one."""
    out = [end_of_turn_ids(tokenizer, use_chat_template=use_chat_template)]
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int) and [eos] not in out:
        out.append([eos])
    return [s for s in out if s]


def ends_with_any(ids: Sequence[int], sequences: Sequence[Sequence[int]]) -> bool:
    """True when ``ids`` ends with one of ``sequences``."""
    n = len(ids)
    return any(0 < len(s) <= n and list(ids[n - len(s):]) == list(s) for s in sequences)
