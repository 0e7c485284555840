"""trainers.subword: a locally trained byte-level BPE for tiny models, saved and loaded like any tokenizer."""

from __future__ import annotations

import pytest
import torch

from envs.protocol import format_turn, parse_turn
from envs.tokens import prompt_ids, tokenize_messages
from trainers.subword import PROTOCOL_TAGS, SPECIAL_TOKENS, train_subword_tokenizer, transcript_corpus, wiki_corpus
from trainers.models import load_lm, load_tokenizer
from trainers.tiny_lm import save_tiny_lm, tiny_lm

TURN = format_turn("Search the title — é", tool_call=("search", {"query": ["Solar Dynamics Observatory"]}))
MESSAGES = [{"role": "system", "content": "Answer with tools."}, {"role": "user", "content": "Which observatory (2001, café)?"},
            {"role": "assistant", "content": TURN}]


def test_markers_and_tags_are_single_tokens_and_text_round_trips(default_wiki):
    texts = list(wiki_corpus(default_wiki, max_pages=200)) + list(transcript_corpus([{"messages": MESSAGES}], 5))
    tok = train_subword_tokenizer(texts, vocab_size=600)
    assert len(tok) == 600 and tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    for t in SPECIAL_TOKENS + PROTOCOL_TAGS:
        assert len(tok.encode(t, add_special_tokens=False)) == 1, t
    ids = tok.encode(TURN, add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == TURN  # the tags are not special: a parser still sees them
    assert parse_turn(tok.decode(ids, skip_special_tokens=True)).strict
    # Subwords: much shorter than bytes; the same texts give the same tokenizer.
    assert len(ids) < 0.6 * len(TURN.encode())
    assert train_subword_tokenizer(texts, vocab_size=600).get_vocab() == tok.get_vocab()
    with_markers = tokenize_messages(MESSAGES, tok)
    assert tok.decode(with_markers.input_ids.tolist()).startswith("<|im_start|>system\nAnswer")
    with pytest.raises(ValueError, match="vocab_size must be"):
        train_subword_tokenizer(texts, vocab_size=100)


def test_save_and_load_round_trip(tmp_path):
    from transformers import AutoTokenizer

    tok = train_subword_tokenizer([TURN] * 10, vocab_size=300)
    model, tok = tiny_lm(hidden=32, tokenizer=tok)
    assert model.config.vocab_size == 300 and model.config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    path = save_tiny_lm(tmp_path / "tiny", hidden=32, tokenizer=tok)
    loaded_model, loaded = load_lm(path)
    for other in (loaded, load_tokenizer(path), AutoTokenizer.from_pretrained(path)):
        assert other.get_vocab() == tok.get_vocab() and other.eos_token_id == tok.eos_token_id
        assert prompt_ids(MESSAGES, other) == prompt_ids(MESSAGES, tok)
        assert other.decode(other.encode(TURN, add_special_tokens=False), skip_special_tokens=True) == TURN
    ids = torch.tensor([prompt_ids(MESSAGES, tok)])
    with torch.no_grad():
        assert torch.equal(loaded_model(ids).logits, model(ids).logits)
    with pytest.raises(ValueError, match="EOS"):
        tiny_lm(hidden=32, tokenizer=type("NoEos", (), {"eos_token_id": None})())
