"""GRPO learning curve on the toy environment with a tiny model on CPU (the learning test, longer).

A 2-layer Qwen2 with ``transformers.ByT5Tokenizer`` (built from a config) gets a format-only
cold start (it answers ``<answer>W</answer>`` with ``W`` a random word of 16), then GRPO
trains it on the toy environment (``tests/trainers/toy_env.py``: the research environment's
protocol, ChatML and exact-match judge) to answer the task's code word. Side by side in one
run: leave-one-out and mean advantages (same start, same seed). Writes the learning curves
as PNG (``--out``, default ``grpo_learning.png``) and the metrics JSONL next to it.

Usage: ``python -m benchmarks.grpo_learning [--steps 40] [--out grpo_learning.png]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
from pathlib import Path

import torch


def curve(model, tok, advantage: str, steps: int, work: Path) -> list[dict]:
    from tests.trainers import toy_env
    from trainers.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(work / advantage), env_id=toy_env.SPEC,
                     env_kwargs=json.dumps({"max_format_errors": 1}), steps=steps, batch_size=32, group_size=8,
                     micro_batch_size=32, learning_rate=2e-3, max_new_tokens=32, pool_size=1, advantage=advantage,
                     device="cpu", tensorboard="off", save_every=0, resume=False)
    trainer = GRPOTrainer(cfg, copy.deepcopy(model), tok, toy_env.TASKS[:1])
    return [trainer.train_step() for _ in range(steps)]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--out", default="grpo_learning.png")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from transformers import ByT5Tokenizer

    from tests.trainers import toy_env

    torch.set_num_threads(1)
    tok = ByT5Tokenizer()
    model = toy_env.tiny_model(tok)
    toy_env.cold_start(model, tok)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for adv in ("loo", "mean"):
            runs[adv] = curve(model, tok, adv, args.steps, Path(tmp))
    out = Path(args.out)
    fig, ax = plt.subplots(figsize=(6, 4))
    for adv, rows in runs.items():
        ax.plot([r["step"] for r in rows], [r["reward/mean"] for r in rows], label=f"{adv} advantages")
    ax.axhline(0.8, color="grey", linestyle=":", label="0.8")
    ax.set_xlabel("GRPO step (32 rollouts, groups of 8)")
    ax.set_ylabel("mean reward")
    ax.set_title("GRPO on the toy environment, 2-layer Qwen2, CPU")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    fig.tight_layout()
    tmp_png = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp_png, dpi=100)
    tmp_png.replace(out)
    with out.with_suffix(".jsonl").open("w") as fh:
        for adv, rows in runs.items():
            for r in rows:
                fh.write(json.dumps({"advantage": adv, **r}) + "\n")
    summary = {}
    print(f"{'advantage':<10}{'first':>8}{'last 3':>8}{'first step >= 0.8 (3-step mean)':>34}")
    for adv, rows in runs.items():
        rewards = [r["reward/mean"] for r in rows]
        hit = next((i + 1 for i in range(2, len(rewards)) if sum(rewards[i - 2:i + 1]) / 3 >= 0.8), None)
        summary[adv] = {"first": rewards[0], "last3": sum(rewards[-3:]) / 3, "steps_to_0.8": hit}
        print(f"{adv:<10}{rewards[0]:>8.3f}{summary[adv]['last3']:>8.3f}{str(hit):>34}")
    result = {"benchmark": "grpo_learning", "steps": args.steps, "png": str(out), **{
        f"{adv}_{k}": v for adv, s in summary.items() for k, v in s.items()}}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
