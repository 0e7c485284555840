"""A tiny causal LM made from a config, for the dense-retrieval tests (no download): an
8-layer Llama of width 32 and a word-level tokenizer trained on the given texts."""

from __future__ import annotations

from pathlib import Path

PAGES = [
    ("Danube", "The Danube is a river in Central Europe that flows through Vienna, Budapest and Belgrade to the "
               "Black Sea."),
    ("Vienna", "Vienna is the capital and largest city of Austria, on the Danube."),
    ("Albert Einstein", "Albert Einstein was a German-born theoretical physicist who developed the theory of "
                        "relativity."),
    ("Marie Curie", "Marie Curie was a Polish and naturalised-French physicist and chemist who conducted "
                    "pioneering research on radioactivity."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    ("Photosynthesis", "Photosynthesis is a process used by plants to convert light energy into chemical energy."),
    ("Jazz", "Jazz is a music genre that originated in the African-American communities of New Orleans."),
    ("Tokyo", "Tokyo is the capital of Japan and one of the most populous cities in the world."),
]


def tiny_model(folder: Path, pages: list[tuple[str, str]] = PAGES) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    words = [f"{t}. {x}" for t, x in pages]
    tokenizer.train_from_iterator(words, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[BOS]"]))
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=8, num_attention_heads=2, num_key_value_heads=2, bos_token_id=1,
                         eos_token_id=0, pad_token_id=0, max_position_embeddings=64)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder
