"""Time per GRPO step: our trainer against TRL's GRPOTrainer, same tiny model, batch and completion length.

Both systems start from the same randomly initialised Qwen2 (``transformers.ByT5Tokenizer``,
nothing downloaded), sample ``--batch`` completions per step (``--batch / --group`` prompts,
``--group`` completions each) of up to ``--completion-tokens`` tokens at temperature 1 from
the same prompts (the toy environment's ChatML prompt, given to TRL as raw text so the
token counts match), and take one optimizer step on the same loss (TRL ``loss_type="dapo"``,
``beta=0``, epsilon 0.2 / 0.28, ``scale_rewards="none"``; ours: token-level clipped loss,
leave-one-out advantages). A random model rarely emits a stop sequence, so completions run to
the length limit on both sides; tokens per second counts the completion tokens each side
actually sampled. Ours runs every episode through the environment (``gym.make``, the turn
parser, the judge); TRL calls a reward function. Both train on every completion, the ones the
length limit cut included (ours ``exclude_truncated=False``, TRL's default
``mask_truncated_completions=False``): ours does not forward trajectories left out of the loss,
which would otherwise make it look faster by training on fewer tokens.

The systems alternate (ours, TRL, ours, TRL), ``--steps`` timed steps per turn after one
warm-up step each; the ratio is of the medians. Ours' rollout and update times (medians) are
reported too. Target: ours / TRL <= 0.8.

Usage: ``python -m benchmarks.grpo_step [--batch 16] [--group 4] [--completion-tokens 64] [--steps 4]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch


def _model(tok, hidden: int, layers: int, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=2048, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, tie_word_embeddings=True)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(cfg)


def ours(args, tok, work: Path) -> tuple[list[float], list[float]]:
    """(seconds per step, sampled completion tokens per step) over warm-up + timed steps."""
    from tests.trainers import toy_env
    from trainers.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(model="-", tasks="-", output_dir=str(work / "ours"), env_id=toy_env.SPEC,
                     env_kwargs=json.dumps({"max_format_errors": 1}), steps=10**6, batch_size=args.batch,
                     group_size=args.group, micro_batch_size=args.batch, learning_rate=1e-5,
                     max_new_tokens=args.completion_tokens, pool_size=len(toy_env.TASKS), retire_window=0,
                     device="cpu", tensorboard="off", save_every=0, resume=False, exclude_truncated=False)
    trainer = GRPOTrainer(cfg, _model(tok, args.hidden, args.layers), tok, toy_env.TASKS)
    times, tokens = [], []
    for _ in range(args.steps + 1):
        t0 = time.perf_counter()
        m = trainer.train_step()
        times.append(time.perf_counter() - t0)
        tokens.append(m["rollout/sampled_tokens"] * m["rollout/trajectories"])
        PARTS["rollout"].append(m["time/rollout_s"])
        PARTS["update"].append(m["time/update_s"])
    del PARTS["rollout"][-args.steps - 1], PARTS["update"][-args.steps - 1]  # the warm-up step
    return times[1:], tokens[1:]


PARTS: dict[str, list[float]] = {"rollout": [], "update": []}
"""Ours' rollout and update seconds per timed step."""


def trl_side(args, tok, work: Path) -> tuple[list[float], list[float]]:
    """TRL GRPOTrainer.train() for warm-up + timed steps; step times from a callback."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig as TRLConfig, GRPOTrainer as TRLTrainer

    from envs.tokens import IM_END, IM_START
    from tests.trainers import toy_env

    prompts = [f"{IM_START}system\n{toy_env.SYSTEM}{IM_END}\n{IM_START}user\n{t['question']}{IM_END}\n"
               f"{IM_START}assistant\n" for t in toy_env.TASKS]
    n_prompts = args.batch // args.group
    rows = [{"prompt": prompts[i % len(prompts)]} for i in range(n_prompts * (args.steps + 1))]
    sampled: list[float] = []

    def reward(completions, completion_ids=None, **kw):
        sampled.append(float(sum(len(c) for c in completion_ids)) if completion_ids is not None else 0.0)
        return [1.0 if "<answer>" in c else 0.0 for c in completions]

    marks: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            marks.append(time.perf_counter())

        def on_train_end(self, *a, **k):
            marks.append(time.perf_counter())

    cfg = TRLConfig(output_dir=str(work / "trl"), loss_type="dapo", beta=0.0, epsilon=0.2, epsilon_high=0.28,
                    scale_rewards="none", per_device_train_batch_size=args.batch, num_generations=args.group,
                    max_completion_length=args.completion_tokens, temperature=1.0, learning_rate=1e-5,
                    max_steps=args.steps + 1, use_cpu=True, bf16=False, report_to=[], save_strategy="no",
                    logging_steps=10**6, gradient_accumulation_steps=1, seed=0, shuffle_dataset=False)
    trainer = TRLTrainer(model=_model(tok, args.hidden, args.layers), reward_funcs=[reward], args=cfg,
                         train_dataset=Dataset.from_list(rows), processing_class=tok, callbacks=[Clock()])
    trainer.train()
    times = [b - a for a, b in zip(marks, marks[1:])]
    return times[1:], sampled[1:len(times)]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16, help="completions per step")
    p.add_argument("--group", type=int, default=4, help="completions per prompt")
    p.add_argument("--completion-tokens", type=int, default=64, help="max sampled tokens per completion")
    p.add_argument("--hidden", type=int, default=64, help="model width")
    p.add_argument("--layers", type=int, default=2, help="model depth")
    p.add_argument("--steps", type=int, default=4, help="timed steps per turn (after one warm-up)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (both systems)")
    args = p.parse_args(argv)
    from transformers import ByT5Tokenizer

    torch.set_num_threads(args.threads)
    for part in PARTS.values():
        part.clear()
    tok = ByT5Tokenizer()
    results: dict[str, list[float]] = {"ours": [], "trl": []}
    toks: dict[str, list[float]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        for turn in range(2):
            for name, fn in (("ours", ours), ("trl", trl_side)):
                t, n = fn(args, tok, Path(tmp) / f"{name}{turn}")
                results[name] += t
                toks[name] += n
    med = {k: statistics.median(v) for k, v in results.items()}
    tps = {k: sum(toks[k]) / sum(results[k]) if sum(results[k]) else 0.0 for k in results}
    per_step = {k: sum(toks[k]) / max(len(toks[k]), 1) for k in toks}
    print(f"GRPO step, tiny Qwen2 ({args.layers} layers, width {args.hidden}), batch {args.batch} "
          f"(group {args.group}), up to {args.completion_tokens} completion tokens, {args.threads} thread(s)")
    print(f"{'system':<10}{'median s/step':>15}{'min s/step':>12}{'tokens/step':>13}{'tokens/s':>10}")
    for k in ("ours", "trl"):
        print(f"{k:<10}{med[k]:>15.3f}{min(results[k]):>12.3f}{per_step[k]:>13.0f}{tps[k]:>10.0f}")
    print(f"ours per step (medians): rollout {statistics.median(PARTS['rollout']):.3f} s, "
          f"update {statistics.median(PARTS['update']):.3f} s")
    out = {"benchmark": "grpo_step", "batch": args.batch, "group": args.group,
           "completion_tokens": args.completion_tokens, "ours_s_per_step": round(med["ours"], 4),
           "trl_s_per_step": round(med["trl"], 4), "ratio_ours_over_trl": round(med["ours"] / med["trl"], 3),
           "ours_tokens_per_s": round(tps["ours"], 1), "trl_tokens_per_s": round(tps["trl"], 1),
           "ours_rollout_s": round(statistics.median(PARTS["rollout"]), 4),
           "ours_update_s": round(statistics.median(PARTS["update"]), 4), "target_ratio": 0.8}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
