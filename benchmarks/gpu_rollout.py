"""Rollout throughput against bare generation, same model, side by side (a GPU check).

Measures, in one run: (1) rollouts through ``websailor/WikiSim-v0`` episodes
(``trainers.rollout.collect``), in sampled tokens per second; (2) bare generation of the very
prompts the rollout generated from, ``--num-envs`` at a time, no environment, in sampled
tokens per second. Target: rollout >= 80% of bare
generation (the environment's cost hidden behind generation).

The model is randomly initialized from a config, nothing is downloaded: ``--size qwen3-0.6b``
(Qwen3-0.6B's shape; the byte vocabulary of ``ByT5Tokenizer`` plus ``<|im_start|>`` and
``<|im_end|>`` as single tokens: 386 ids) or ``--size tiny`` (for a CPU smoke run). It is
saved to a temporary directory, which vLLM loads (``--backend vllm``, GPU) or transformers
uses (``--backend transformers``). A random model rarely closes its turns, so turns run to
``--max-new-tokens`` and episodes end on format errors after three turns; tool calls are rare.
One GRPO step's time is ``benchmarks/grpo_step.py``'s job.

Usage: ``python -m benchmarks.gpu_rollout --wiki-dir data/wiki --tasks TASKS.jsonl [--backend vllm]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import ByT5Tokenizer

from envs.tasks import load_tasks
from envs.tokens import stop_sequences

SIZES = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16),
}


def byte_tokenizer() -> ByT5Tokenizer:
    tok = ByT5Tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    return tok


def save_model(size: str, out: Path) -> Path:
    """A randomly initialized Qwen3 of the given shape, with the byte tokenizer, saved to ``out``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = byte_tokenizer()
    config = Qwen3Config(vocab_size=len(tok), max_position_embeddings=32768, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                         bos_token_id=None, torch_dtype="bfloat16", **SIZES[size])
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(torch.bfloat16 if size != "tiny" else torch.float32).save_pretrained(out)
    tok.save_pretrained(out)
    # AutoTokenizer (and so vLLM) would otherwise pick the model type's tokenizer class.
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "ByT5Tokenizer"
    cfg_path.write_text(json.dumps(cfg))
    return out


def make_agent(backend: str, model_dir: Path, device: str) -> Any:
    if backend == "vllm":
        from trainers.policies import VLLMPolicy

        return VLLMPolicy(str(model_dir), tokenizer=byte_tokenizer(), seed=0, gpu_memory_utilization=0.6,
                          max_model_len=32768, enforce_eager=False)
    from transformers import AutoModelForCausalLM

    from trainers.policies import TransformersPolicy

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    return TransformersPolicy(model, byte_tokenizer(), device=device)


class RecordingPolicy:
    """Passes through to a policy and keeps every prompt it was asked to continue."""

    def __init__(self, inner: Any):
        self.inner, self.tokenizer, self.prompts = inner, inner.tokenizer, []

    def generate(self, prompts, **kwargs):
        self.prompts += [list(p) for p in prompts]
        return self.inner.generate(prompts, **kwargs)


def bare_generation(policy: Any, prompts: list[list[int]], args: argparse.Namespace) -> dict[str, float]:
    """The rollout's own prompts, generated without environments, ``--num-envs`` at a time."""
    stops = stop_sequences(policy.tokenizer)
    tokens, start = 0, time.perf_counter()
    for i in range(0, len(prompts), args.num_envs):
        gens = policy.generate(prompts[i:i + args.num_envs], max_new_tokens=args.max_new_tokens, temperature=1.0,
                               top_p=1.0, stop_ids=stops)
        tokens += sum(len(g.token_ids) for g in gens)
    seconds = time.perf_counter() - start
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def rollouts(policy: Any, tasks: list[dict], args: argparse.Namespace) -> dict[str, float]:
    from trainers.rollout import RolloutConfig, collect

    config = RolloutConfig(env_kwargs={"wiki_dir": args.wiki_dir, "tasks": tasks, "tools": ["search", "visit"]},
                           num_envs=args.num_envs, tool_workers=args.num_envs, max_new_tokens=args.max_new_tokens,
                           max_total_tokens=30000, max_episode_seconds=None)
    start = time.perf_counter()
    trajs = collect(policy, tasks, config, progress=False)
    seconds = time.perf_counter() - start
    tokens = sum(sum(t.loss_mask) for t in trajs)
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds, "episodes": len(trajs),
            "turns": sum(t.num_turns for t in trajs), "tool_calls": sum(t.num_tool_calls for t in trajs)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki-dir", required=True)
    parser.add_argument("--tasks", required=True, help="task JSONL; the first --episodes tasks are played")
    parser.add_argument("--backend", choices=["vllm", "transformers"], default="vllm")
    parser.add_argument("--size", choices=sorted(SIZES), default="qwen3-0.6b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    args = parser.parse_args(argv)
    tasks = [t.to_dict() for t in load_tasks(args.tasks)][: args.episodes]
    with tempfile.TemporaryDirectory() as tmp:
        policy = RecordingPolicy(make_agent(args.backend, save_model(args.size, Path(tmp) / "model"), args.device))
        rollout = rollouts(policy, tasks, args)
        bare = bare_generation(policy.inner, policy.prompts, args)
    ratio = rollout["tokens_per_s"] / bare["tokens_per_s"]
    print(f"{'mode':<10} {'tokens':>9} {'seconds':>8} {'tokens/s':>10}")
    print(f"{'bare':<10} {bare['tokens']:>9} {bare['seconds']:>8.2f} {bare['tokens_per_s']:>10.1f}")
    print(f"{'rollout':<10} {rollout['tokens']:>9} {rollout['seconds']:>8.2f} {rollout['tokens_per_s']:>10.1f}")
    print(f"rollout episodes {rollout['episodes']}, turns {rollout['turns']}, tool calls {rollout['tool_calls']}")
    result = {"benchmark": "gpu_rollout", "backend": args.backend, "size": args.size, "num_envs": args.num_envs,
              "max_new_tokens": args.max_new_tokens, "bare_tokens_per_s": round(bare["tokens_per_s"], 1),
              "rollout_tokens_per_s": round(rollout["tokens_per_s"], 1), "rollout_over_bare": round(ratio, 3),
              "target": 0.8, "episodes": rollout["episodes"], "tool_calls": rollout["tool_calls"]}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
