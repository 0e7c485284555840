"""A small subword tokenizer trained locally, for tiny models on CPU (nothing downloaded).

Byte-level BPE (the HF ``tokenizers`` library, GPT-2 style pre-tokenization, so every
string encodes and every id sequence decodes) trained on text at hand: the simulator's
page titles, URLs and leads (:func:`wiki_corpus`), the turn protocol (:func:`protocol_corpus`)
and, when given, transcripts. As in Qwen tokenizers:

- ``<|im_start|>`` and ``<|im_end|>`` are *special* tokens (one id each; ``<|im_end|>`` is
  the EOS token, so :func:`envs.tokens.stop_sequences` stops on one id, and
  ``decode(..., skip_special_tokens=True)`` drops them);
- the protocol tags (``<think>``, ``</think>``, ``<tool_call>``, ``</tool_call>``,
  ``<tool_response>``, ``</tool_response>``, ``<answer>``, ``</answer>``) are added tokens that
  are *not* special: one id each, kept by ``skip_special_tokens=True`` (a parser needs them).

No chat template: :mod:`envs.tokens` uses its ChatML fallback, and since both markers are
single tokens that split the text, a transcript tokenized piece by piece equals what a
rollout builds from prompt, sampled ids and observations. The result is a
``transformers.Qwen2Tokenizer`` (Qwen2's NFC normalizer and pre-tokenizer, trained merges):
``save_pretrained`` writes ``tokenizer.json`` and ``AutoTokenizer.from_pretrained`` builds the
same tokenizer back from a saved tiny Qwen2 (it picks ``Qwen2Tokenizer`` for that model type).
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Iterable, Iterator

SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
"""ChatML markers (one id each) and the padding token, special: ids 0, 1, 2."""
PROTOCOL_TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
                 "<answer>", "</answer>")
"""The turn protocol's tags: one id each, not special (``skip_special_tokens`` keeps them)."""
MIN_VOCAB = 256 + len(SPECIAL_TOKENS) + len(PROTOCOL_TAGS)
MAX_CORPUS_CHARS = 50_000_000
"""Training text beyond this many characters is ignored (bounds time and memory)."""


def protocol_corpus() -> list[str]:
    """The turn protocol as text: the compact system prompt and well-formed turns of both kinds."""
    from envs.protocol import format_turn
    from envs.compact import COMPACT_SYSTEM_PROMPT

    return [COMPACT_SYSTEM_PROMPT,
            format_turn("Search for the salient words", tool_call=("search", {"query": ["a b", "c d"]})),
            format_turn("Read the best hits", tool_call=("visit", {"url": ["https://en.wikipedia.org/wiki/A"],
                                                                  "goal": "Which article? Answer with the title."})),
            format_turn("The best-supported candidate is A.", answer="A")]


def wiki_corpus(wiki_dir: str | os.PathLike, max_pages: int | None = None) -> Iterator[str]:
    """Title, URL and lead of the simulator's pages (the first ``max_pages``), one string each."""
    from wiki_sim import WikiSim

    sim = WikiSim(wiki_dir)
    try:
        urls = {p.title: p.url for p in sim.iter_pages()}
        for title, lead in itertools.islice(sim.iter_leads(), max_pages):
            yield f"{title}\n{urls.get(title, '')}\n{lead}"
    finally:
        sim.close()


def transcript_corpus(records: Iterable[dict[str, Any]], repeat: int = 1) -> Iterator[str]:
    """Trajectory records (``{"messages": [{"role", "content"}, ...]}``) in ChatML, ``repeat`` times
    each (more weight against a large page corpus)."""
    from envs.tokens import chatml

    for record in records:
        text = "".join(chatml(m["role"], m["content"]) for m in record.get("messages", ())
                       if isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str))
        for _ in range(repeat):
            yield text


def _bounded(texts: Iterable[str]) -> Iterator[str]:
    total = 0
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"the tokenizer's training texts must be strings, got {type(text).__name__}")
        total += len(text)
        if total > MAX_CORPUS_CHARS:
            return
        yield text


def train_subword_tokenizer(texts: Iterable[str], *, vocab_size: int = 1024) -> Any:
    """A byte-level BPE ``Qwen2Tokenizer`` with ``vocab_size`` ids (all 256 bytes, the
    ChatML markers, the protocol tags and merges learned from ``texts`` plus :func:`protocol_corpus`).
    Deterministic for the same texts."""
    import json

    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    if not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB:
        raise ValueError(f"vocab_size must be an int >= {MIN_VOCAB} (bytes, markers and tags), got {vocab_size!r}")
    # Qwen2's normalizer and pre-tokenizer, so that the Qwen2Tokenizer that AutoTokenizer builds for a
    # saved Qwen2 model (it rebuilds the pipeline from the vocabulary and merges) splits text the same way.
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(PROTOCOL_TAGS), show_progress=False,
                                  special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_bounded(itertools.chain(protocol_corpus(), texts)), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    out = Qwen2Tokenizer(vocab=model["vocab"], merges=merges, unk_token=None, eos_token="<|im_end|>",
                         pad_token="<|endoftext|>", clean_up_tokenization_spaces=False, model_max_length=32768)
    out.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS], special_tokens=True)
    out.add_tokens([AddedToken(t, special=False, normalized=False) for t in PROTOCOL_TAGS])
    if len(out) != vocab_size:
        raise ValueError(f"the trained tokenizer has {len(out)} ids, expected vocab_size={vocab_size} "
                         "(the texts are too small to learn that many merges: give more text or a smaller vocab_size)")
    return out
