"""envs.tokens: transcripts as ids and loss masks, with and without a chat template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import ByT5Tokenizer

from envs.tokens import (IM_END, end_of_turn_ids, ends_with_any, generation_prompt_ids, observation_ids,
                         prompt_ids, stop_sequences, tokenize_messages)

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# Like Qwen2.5's: a default system message when the transcript has none.
DEFAULT_SYSTEM_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are helpful.<|im_end|>\\n' }}{% endif %}"
    + CHATML_TEMPLATE)
# Rewrites earlier turns (as Qwen3 drops earlier thoughts): not prefix-stable.
UNSTABLE_TEMPLATE = (
    "{% for message in messages %}{% if loop.last %}{{ message['content'] }}{% else %}{{ message['content'][:3] }}"
    "{% endif %}{% endfor %}")

MESSAGES = [
    {"role": "system", "content": "You are a researcher."},
    {"role": "user", "content": "Who won? é"},
    {"role": "assistant", "content": "<think>\nsearch\n</think>\n<tool_call>\n{\"name\": \"search\"}\n</tool_call>"},
    {"role": "user", "content": "<tool_response>\nhits\n</tool_response>"},
    {"role": "assistant", "content": "<think>\nfound\n</think>\n<answer>Santa Claus</answer>"},
]
REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "webdancer_sample_traj.jsonl"


def byt5(template: str | None = None, special: bool = False) -> ByT5Tokenizer:
    tok = ByT5Tokenizer()
    if special:
        tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    if template is not None:
        tok.chat_template = template
    return tok


def subword():
    """The locally trained byte-level BPE (trainers.subword): markers and protocol tags are one id each."""
    from trainers.subword import train_subword_tokenizer

    return train_subword_tokenizer([m["content"] for m in MESSAGES] * 10, vocab_size=300)


SUBWORD = subword()


def decode(tok, ids) -> str:
    return tok.decode(ids, skip_special_tokens=False)


def masked_text(tok, transcript, value: int) -> str:
    ids = transcript.input_ids[transcript.loss_mask == value].tolist()
    return decode(tok, ids)


@pytest.mark.parametrize("tok", [byt5(), byt5(CHATML_TEMPLATE), byt5(CHATML_TEMPLATE, special=True), byt5(special=True),
                                 SUBWORD],
                         ids=["fallback", "template", "template-special", "fallback-special", "subword"])
def test_chatml_ids_and_mask(tok):
    t = tokenize_messages(MESSAGES, tok)
    assert t.input_ids.shape == t.loss_mask.shape and t.input_ids.dtype == t.loss_mask.dtype
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in MESSAGES)
    assert decode(tok, t.input_ids.tolist()) == text
    # 1 exactly on the assistant contents and the <|im_end|> that closes each.
    assert masked_text(tok, t, 1) == "".join(m["content"] + IM_END for m in MESSAGES if m["role"] == "assistant")
    assert "assistant\n" not in masked_text(tok, t, 1)
    assert "<tool_response>" in masked_text(tok, t, 0) and "You are a researcher." in masked_text(tok, t, 0)
    # The mask is two contiguous runs of ones (one per assistant turn).
    runs = sum(1 for a, b in zip([0] + t.loss_mask.tolist(), t.loss_mask.tolist()) if b == 1 and a == 0)
    assert runs == 2


def test_template_default_system_and_generation_prompt():
    tok = byt5(DEFAULT_SYSTEM_TEMPLATE)
    t = tokenize_messages(MESSAGES[1:], tok, add_generation_prompt=True)
    text = decode(tok, t.input_ids.tolist())
    assert text.startswith("<|im_start|>system\nYou are helpful.<|im_end|>\n")
    assert text.endswith("<|im_start|>assistant\n")
    assert masked_text(tok, t, 1) == "".join(m["content"] + IM_END for m in MESSAGES if m["role"] == "assistant")
    assert prompt_ids(MESSAGES[1:], tok) == t.input_ids.tolist()


def test_unstable_template_is_refused_and_fallback_works():
    tok = byt5(UNSTABLE_TEMPLATE)
    with pytest.raises(ValueError, match="prefix-stable"):
        tokenize_messages(MESSAGES, tok)
    t = tokenize_messages(MESSAGES, tok, use_chat_template=False)
    assert decode(tok, t.input_ids.tolist()).startswith("<|im_start|>system\n")
    with pytest.raises(ValueError, match="no chat_template"):
        tokenize_messages(MESSAGES, byt5(), use_chat_template=True)


@pytest.mark.parametrize("tok", [byt5(), byt5(CHATML_TEMPLATE, special=True), SUBWORD],
                         ids=["fallback", "template-special", "subword"])
def test_incremental_ids_equal_whole_transcript(tok):
    """prompt + sampled body + observation ids, turn by turn, give the transcript's ids."""
    ids = prompt_ids(MESSAGES[:2], tok)
    mask = [0] * len(ids)
    for m in MESSAGES[2:]:
        if m["role"] == "assistant":
            body = tok.encode(m["content"], add_special_tokens=False) + end_of_turn_ids(tok)
            assert ends_with_any(body, stop_sequences(tok))
            ids += body
            mask += [1] * len(body)
        else:
            obs = observation_ids(m["content"], tok)
            ids += obs
            mask += [0] * len(obs)
    ids += tok.encode("\n", add_special_tokens=False)  # what the environment adds after the last turn
    mask += [0]
    t = tokenize_messages(MESSAGES, tok)
    assert ids == t.input_ids.tolist() and mask == t.loss_mask.tolist()
    assert decode(tok, generation_prompt_ids(tok)) == "<|im_start|>assistant\n"
    assert decode(tok, observation_ids("x", tok)) == "\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"


def test_stop_sequences():
    assert stop_sequences(byt5()) == [ByT5Tokenizer().encode(IM_END, add_special_tokens=False), [1]]
    special = byt5(special=True)
    assert stop_sequences(special)[0] == [special.convert_tokens_to_ids(IM_END)]
    assert stop_sequences(SUBWORD) == [[SUBWORD.convert_tokens_to_ids(IM_END)]]  # <|im_end|> is its EOS
    assert ends_with_any([5, 6, 7], [[6, 7]]) and not ends_with_any([7], [[6, 7]]) and not ends_with_any([], [[]])


def test_bad_messages():
    with pytest.raises(ValueError, match="messages\\[1\\]"):
        tokenize_messages([{"role": "user", "content": "a"}, {"role": "assistant"}], byt5())
    with pytest.raises(ValueError, match="list"):
        tokenize_messages("hello", byt5())


@pytest.mark.skipif(not REFERENCE.is_file(), reason="../shared/reference is not present")
@pytest.mark.parametrize("template", [None, CHATML_TEMPLATE], ids=["fallback", "template"])
def test_released_trajectories(template):
    """The released WebDancer trajectories, read unchanged: the loss covers the assistant turns only."""
    tok = byt5(template)
    with REFERENCE.open(encoding="utf-8") as fh:
        records = [json.loads(line) for _, line in zip(range(3), fh)]
    for record in records:
        messages = record["messages"]
        t = tokenize_messages(messages, tok)
        assert masked_text(tok, t, 1) == "".join(m["content"] + IM_END for m in messages if m["role"] == "assistant")
        zeros = masked_text(tok, t, 0)
        for m in messages:
            if m["role"] != "assistant":
                assert m["content"] in zeros
