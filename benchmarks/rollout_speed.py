"""Rollout speed of the transformers engine: the KV engine, the old ``model.generate`` engine and
bare batched generation, same model, same prompts, side by side in one run.

For each count of parallel episodes (``--parallel 16,64``), in one process:

- ``kv``: ``trainers.rollout.collect`` through ``websailor/WikiSim-v0`` with
  ``TransformersPolicy(engine="kv")`` (:mod:`trainers.decode`: lockstep batches, each episode's
  keys and values kept across its turns, the shared system prompt computed once, sampling on the
  device);
- ``generate``: the same rollouts with ``engine="generate"``, the engine of 2a2045e (its
  ``_generate_batch`` is unchanged: ``model.generate`` per turn, the whole history re-encoded, each
  row sampled on the host);
- ``bare``: ``model.generate`` on the rollouts' first prompts, all at once, ``max_new_tokens`` each
  (EOS ignored, so every row samples the full length), no environment: what the hardware gives.

Every episode is seeded (``RolloutConfig.seed``), so both engines sample the same tokens up to
floating-point effects; the table says how many episodes ended identically. Rollout tokens/s counts
sampled tokens over the collection's wall time (environment steps, prefill of observations and
everything else included). Episodes are ``--group-size`` samples of each task, as in a GRPO step.

Targets (issue 31, on 2 CPU cores): kv >= 5x generate, kv >= 0.8x bare.

Usage: ``python -m benchmarks.rollout_speed [--wiki-dir data/wiki] [--parallel 16,64] [--device cpu]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch

from trainers.models import load_lm
from trainers.policies import TransformersPolicy
from trainers.rollout import RolloutConfig, collect
from websailor.recipe import compact_env_kwargs, lookup_tasks


def rollouts(policy: TransformersPolicy, tasks: list[dict], group: int, args: argparse.Namespace) -> dict[str, Any]:
    if args.env == "compact":
        env_kwargs = compact_env_kwargs(args.wiki_dir, max_tool_calls=args.max_tool_calls)
    else:
        env_kwargs = {"wiki_dir": args.wiki_dir, "tools": ["search", "visit"], "max_tool_calls": args.max_tool_calls}
    config = RolloutConfig(env_kwargs=env_kwargs,
                           num_envs=len(tasks) * group, tool_workers=4, max_new_tokens=args.max_new_tokens,
                           temperature=args.temperature, top_p=args.top_p, seed=args.seed,
                           max_batch_wait_s=0.05, schedule="lockstep")
    start = time.perf_counter()
    trajectories = collect(policy, tasks, config, group_size=group, progress=False)
    seconds = time.perf_counter() - start
    sampled = sum(sum(t.loss_mask) for t in trajectories)
    return {"seconds": seconds, "sampled": sampled, "tokens_per_s": sampled / seconds,
            "turns": sum(t.num_turns for t in trajectories) / len(trajectories),
            "first_prompts": [t.prompt_ids for t in trajectories],
            "tokens": [t.token_ids for t in trajectories]}


@torch.no_grad()
def bare(model: Any, tokenizer: Any, prompts: list[list[int]], args: argparse.Namespace) -> dict[str, Any]:
    """``model.generate`` on ``prompts`` (left-padded, one batch), ``max_new_tokens`` sampled per row."""
    from transformers import GenerationConfig

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=args.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=args.device)
    config = GenerationConfig(max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens,
                              do_sample=args.temperature > 0, temperature=args.temperature or None,
                              top_p=args.top_p, top_k=0, pad_token_id=pad)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    seconds = time.perf_counter() - start
    sampled = (out.shape[1] - width) * len(prompts)
    return {"seconds": seconds, "sampled": sampled, "tokens_per_s": sampled / seconds}


def _counts(text: str) -> list[int]:
    """``"16,64"`` -> ``[16, 64]``: positive integers, comma-separated (argparse's type)."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki-dir", default="data/wiki", help="the simulator (default: data/wiki)")
    parser.add_argument("--model", default="smollm2-135m", help="model folder or short name (default: smollm2-135m)")
    parser.add_argument("--parallel", type=_counts, default=[16, 64],
                        help="episodes run at once, comma-separated (default: 16,64)")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per task (default: 4)")
    parser.add_argument("--engines", type=lambda t: [e for e in t.split(",") if e], default=["kv", "generate"],
                        help="engines to compare, of kv and generate (default: kv,generate)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per turn (default: 64, the main job's)")
    parser.add_argument("--max-tool-calls", type=int, default=2, help="tool calls per episode (default: 2)")
    parser.add_argument("--env", choices=("compact", "full"), default="compact",
                        help="compact: the main job's environment (short prompt, top-3 hits); full: the default "
                             "system prompt with the search and visit tools (default: compact)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.engines or set(args.engines) - {"kv", "generate"} or "kv" not in args.engines:
        parser.error(f"--engines must list kv and optionally generate, got {','.join(args.engines)!r}")
    if args.group_size < 1 or args.max_new_tokens < 1:
        parser.error("--group-size and --max-new-tokens must be positive")
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_lm(args.model)
    model.to(args.device).eval()
    engines = args.engines
    rows, summary = [], {}
    for parallel in args.parallel:
        tasks = lookup_tasks(args.wiki_dir, max(1, parallel // args.group_size), seed=args.seed + parallel)
        results = {e: rollouts(TransformersPolicy(model, tokenizer, device=args.device, engine=e), tasks,
                               args.group_size, args) for e in engines}
        first = next(iter(results.values()))
        results["bare"] = bare(model, tokenizer, first["first_prompts"], args)
        same = (sum(a == b for a, b in zip(results["kv"]["tokens"], results["generate"]["tokens"]))
                if {"kv", "generate"} <= set(results) else None)
        entry = {name: {k: round(v, 3) for k, v in r.items() if isinstance(v, (int, float))}
                 for name, r in results.items()}
        if "kv" in results:
            kv = results["kv"]["tokens_per_s"]
            entry["ratio"] = round(kv / results["bare"]["tokens_per_s"], 3)
            if "generate" in results:
                entry["speedup"] = round(kv / results["generate"]["tokens_per_s"], 3)
        entry["same_episodes"] = same
        summary[str(parallel)] = entry
        for name, r in results.items():
            rows.append((parallel, name, r["sampled"], r["seconds"], r["tokens_per_s"], r.get("turns")))
    print(f"{'parallel':>8} {'system':>9} {'sampled':>8} {'seconds':>8} {'tok/s':>8} {'turns':>6}")
    for parallel, name, sampled, seconds, tps, turns in rows:
        print(f"{parallel:>8} {name:>9} {sampled:>8} {seconds:>8.1f} {tps:>8.1f} "
              f"{'' if turns is None else f'{turns:.2f}':>6}")
    for parallel, entry in summary.items():
        print(f"{parallel} parallel: kv/bare {entry.get('ratio')}, kv/generate {entry.get('speedup')}, "
              f"identical episodes {entry['same_episodes']}")
    first = summary[next(iter(summary))]
    print(json.dumps({"benchmark": "rollout_speed", "device": args.device, "model": args.model, "env": args.env,
                      "threads": torch.get_num_threads(), "max_new_tokens": args.max_new_tokens,
                      "rollout_tokens_per_s": first.get("kv", {}).get("tokens_per_s"),
                      "bare_tokens_per_s": first["bare"]["tokens_per_s"], "ratio": first.get("ratio"),
                      "by_parallel": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
