"""Tiny models built from a config (nothing downloaded) and an in-memory environment id."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from transformers import ByT5Tokenizer, Qwen2Config, Qwen2ForCausalLM

from envs.env import ResearchEnv
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool
from tests.envs.conftest import TASKS, MiniWiki

MINI_ENV_ID = "test/MiniWiki-v0"
MINI_SHORT_ENV_ID = "test/MiniWikiShort-v0"
"""The same with a one-line system prompt: short prompts keep tiny-model tests fast."""


def make_mini_env(tools=None, **kwargs):
    """The research environment over the in-memory MiniWiki (plus any extra tools)."""
    wiki = MiniWiki()
    return ResearchEnv([SearchTool(wiki), VisitTool(wiki), *(tools or [])], kwargs.pop("tasks", TASKS),
                       current_date="2025-07-18", **kwargs)


if MINI_ENV_ID not in gym.registry:
    gym.register(MINI_ENV_ID, entry_point=make_mini_env)
if MINI_SHORT_ENV_ID not in gym.registry:
    gym.register(MINI_SHORT_ENV_ID, entry_point=make_mini_env, kwargs={"system_prompt": "Answer with tools."})


def tiny_qwen2(seed: int = 0, vocab_size: int = 384) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return ByT5Tokenizer()


def small_subword_tokenizer(vocab_size: int = 384):
    """The locally trained byte-level BPE of trainers.subword, on the mini wiki's tasks and the protocol."""
    from trainers.subword import train_subword_tokenizer

    texts = [f"{t['question']} {t['answer']}" for t in TASKS] * 20
    return train_subword_tokenizer(texts, vocab_size=vocab_size)


@pytest.fixture(scope="module")
def model():
    return tiny_qwen2()
