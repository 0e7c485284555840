"""SFT on gold trajectories from the simulator teaches a tiny model (short CPU version).

Gold data: the heuristic agent on tasks derived from the default simulator, compact
environment, rejection-sampled; the model reads the locally trained subword tokenizer
(trainers.subword). This short run (STEPS optimizer steps, about a minute on two CPU cores)
checks that SFT lowers the loss on the assistant tokens of *held-out* trajectories well below
the untrained model's. It does NOT show well-formed turns: after 100 steps the model still
writes none (measured: 0% of held-out turns strictly well formed at steps 60 and 100; the
format is learned later, together with copying the question and URLs). The target of
>= 90% strictly well-formed held-out turns is measured by ``python -m
benchmarks.sft_learning`` (see docs/training.md, "Gold trajectories and the learning curve").
"""

from __future__ import annotations

import itertools

import torch

from envs.derived_tasks import derive_tasks
from envs.trajectory import write_trajectories
from trainers.gold import heuristic_trajectories, make_env
from trainers.sft import SFTConfig, masked_token_loss_sum, train
from trainers.sft_data import FilterConfig, build_examples, read_records
from trainers.subword import train_subword_tokenizer, transcript_corpus, wiki_corpus
from trainers.tiny_lm import tiny_lm

STEPS = 100


@torch.no_grad()
def _heldout_loss(model, examples) -> float:
    model.eval()
    total = tokens = 0.0
    for ex in examples:
        logits = model(input_ids=ex.input_ids[None]).logits
        total += float(masked_token_loss_sum(logits, ex.input_ids[None], ex.loss_mask[None]))
        tokens += int(ex.loss_mask[1:].sum())
    model.train()
    return total / tokens


def test_sft_on_gold_trajectories_lowers_heldout_loss(default_wiki, tmp_path):
    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 120, seed=0)]
    env = make_env(default_wiki, tasks)
    try:
        records = heuristic_trajectories(env, len(tasks))
    finally:
        env.close()
    assert sum(r["is_correct"] for r in records) >= len(records) // 2  # the gold agent mostly succeeds
    train_recs, held = records[:-10], [r for r in records[-10:] if r["is_correct"]]
    write_trajectories(tmp_path / "train.jsonl", train_recs)
    write_trajectories(tmp_path / "heldout.jsonl", held)
    tok = train_subword_tokenizer(itertools.chain(wiki_corpus(default_wiki, max_pages=3000),
                                                  transcript_corpus(train_recs, repeat=10)), vocab_size=2048)
    model, tok = tiny_lm(hidden=128, seed=0, tokenizer=tok)
    heldout, _ = build_examples(read_records([str(tmp_path / "heldout.jsonl")]), tok, FilterConfig())
    assert heldout
    before = _heldout_loss(model, heldout)
    config = SFTConfig(data=[str(tmp_path / "train.jsonl")], model="-", output_dir=str(tmp_path / "run"), lr=3e-3,
                       min_lr=3e-5, max_steps=STEPS, batch_size=4, warmup_ratio=0.05, tensorboard="off",
                       save_every=10 ** 6)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on two shared cores one thread trains several times faster than two
    try:
        result = train(config, model=model, tokenizer=tok)
        after = _heldout_loss(model, heldout)
    finally:
        torch.set_num_threads(threads)
    assert result.filter_report["dropped"].get("incorrect", 0) == sum(not r["is_correct"] for r in train_recs)
    assert after < 0.7 * before, (before, after)


def test_format_validity_plays_episodes_and_counts_strict_turns(default_wiki):
    from trainers.sft_eval import format_validity

    tasks = [t.to_dict() for t in derive_tasks(default_wiki, 2, seed=0)]
    env = make_env(default_wiki, tasks)
    model, tok = tiny_lm(hidden=32, seed=0)
    try:
        result = format_validity(model, tok, env, [0, 1], max_new_tokens=8, max_turns=2)
    finally:
        env.close()
    # an untrained model writes noise: every turn is counted and none is well formed
    assert result["turns"] == 4 and result["strict_turns"] == 0 and result["rate"] == 0.0
    assert model.training  # the training mode is restored
