"""GRPO learning curve on the multi-task toy environment with a tiny model on CPU.

A 2-layer Qwen2 (built from a config) over a subword tokenizer trained here on the toy
protocol (``--tokenizer subword``, :mod:`trainers.subword`: every colour and code word is one
token; ``byte`` keeps ``transformers.ByT5Tokenizer``) gets a format-only cold start
(``<answer>W</answer>``, or ``<think>colour</think><answer>W</answer>`` with ``--think``, with
``W`` a random word of 16, whatever the question), then GRPO (``trainers.grpo.GRPOTrainer``,
the environment made by ``gym.make`` through the rollouts) trains it on ``--tasks`` tasks of the
toy environment (``tests/trainers/toy_env.py``: the research environment's protocol, ChatML and
exact-match judge; every task asks for a different colour's code word). The pool draws the
tasks per group as in any GRPO run.

A policy that ignores the question answers every task from one distribution, so its
per-task pass rates add up to at most 1 and its mean reward is at most ``1 / tasks``;
the table reports each task's pass rate at the start and the end (16 sampled episodes
each) and that sum. Writes the learning curve as PNG (``--out``) and the metrics JSONL
next to it. Prints a table, then one line of JSON.

Usage: ``python -m benchmarks.grpo_learning [--tasks 4] [--steps 250] [--out grpo_learning.png]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from wiki_sim.common.jsonl import atomic_open, write_jsonl_atomic


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=4, help="toy tasks (colours) to train on, 2..8")
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--group-size", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--advantage", choices=["loo", "mean"], default="loo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer", choices=["subword", "byte"], default="subword",
                   help="subword: a byte-level BPE trained here on the toy protocol (trainers.subword; every colour and "
                        "code word one token); byte: ByT5")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=False,
                   help="the cold start writes <think>colour</think> before the answer (RL then drifts the thought too)")
    p.add_argument("--kl-beta", type=float, default=0.0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--eval-episodes", type=int, default=16, help="sampled episodes per task for the pass rates")
    p.add_argument("--out", default="grpo_learning.png")
    args = p.parse_args(argv)
    from tests.trainers import toy_env

    if not 2 <= args.tasks <= len(toy_env.TASKS):
        p.error(f"--tasks must be in [2, {len(toy_env.TASKS)}], got {args.tasks}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trainers.grpo import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    tasks = toy_env.TASKS[:args.tasks]
    tok = toy_env.toy_tokenizer(args.tokenizer)
    if args.tokenizer == "subword":
        from trainers.tiny_lm import tiny_lm

        model, tok = tiny_lm(layers=2, hidden=64, heads=4, seed=args.seed, max_positions=1024, tokenizer=tok)
    else:
        model = toy_env.tiny_model(tok, seed=args.seed)
    toy_env.cold_start(model, tok, tasks=tasks, seed=args.seed, think=args.think)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = GRPOConfig(model="-", tasks="-", output_dir=tmp, env_id=toy_env.SPEC,
                         env_kwargs=json.dumps({"max_format_errors": 1}), steps=args.steps,
                         batch_size=args.batch_size, group_size=args.group_size, micro_batch_size=args.batch_size,
                         learning_rate=args.learning_rate, max_new_tokens=48, pool_size=len(tasks), retire_window=0,
                         advantage=args.advantage, kl_beta=args.kl_beta,
                         temperature=args.temperature, lockstep_rollouts=True, seed=args.seed, device="cpu",
                         tensorboard="off", save_every=0, resume=False)
        trainer = GRPOTrainer(cfg, model, tok, tasks)
        start = toy_env.pass_rates(trainer, tasks, args.eval_episodes)
        rows = [trainer.train_step() for _ in range(args.steps)]
        end = toy_env.pass_rates(trainer, tasks, args.eval_episodes)
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    rewards = [r["reward/mean"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["step"] for r in rows], rewards, label=f"mean reward ({args.advantage} advantages)")
    ax.axhline(0.8, color="grey", linestyle=":", label="0.8")
    ax.axhline(1 / len(tasks), color="red", linestyle="--", label="best policy that ignores the question")
    ax.set_xlabel(f"GRPO step ({args.batch_size} rollouts, groups of {args.group_size}, {len(tasks)} tasks)")
    ax.set_ylabel("mean reward")
    ax.set_title(f"GRPO on the multi-task toy environment, 2-layer Qwen2 ({args.tokenizer} tokens), CPU")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_open(out, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    write_jsonl_atomic(out.with_suffix(".jsonl"), rows, ensure_ascii=True)
    last = min(10, len(rewards))
    hit = next((i + 1 for i in range(2, len(rewards)) if sum(rewards[i - 2:i + 1]) / 3 >= 0.8), None)
    print(f"{'task':<12}{'answer':<8}{'pass@start':>11}{'pass@end':>10}")
    for t in tasks:
        print(f"{t['id']:<12}{t['answer']:<8}{start[t['id']]:>11.3f}{end[t['id']]:>10.3f}")
    print(f"{'sum':<20}{sum(start.values()):>11.3f}{sum(end.values()):>10.3f}   (<= 1 for a policy ignoring the question)")
    result = {"benchmark": "grpo_learning", "tasks": len(tasks), "steps": args.steps, "batch_size": args.batch_size,
              "group_size": args.group_size, "learning_rate": args.learning_rate, "advantage": args.advantage,
              "tokenizer": args.tokenizer, "think": args.think, "kl_beta": args.kl_beta, "temperature": args.temperature,
              "reward_first": rewards[0], f"reward_last{last}": sum(rewards[-last:]) / last,
              "steps_to_0.8": hit, "pass_start": start, "pass_end": end,
              "pass_end_sum": sum(end.values()), "min_pass_end": min(end.values()), "seconds": round(seconds, 1),
              "png": str(out)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
