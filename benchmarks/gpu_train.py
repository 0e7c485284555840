"""GRPO on one GPU with vLLM in the loop, measured side by side in one run (the prepared GPU check).

One process, one engine, one model (nothing downloaded): a randomly initialized Qwen3 of
Qwen3-0.6B's shape (``--size qwen3-0.6b``; the vocabulary is the tokenizer's), Qwen3's chat template
as shipped (TRL's copy, ``trl/chat_templates/qwen3.jinja``) on a real byte-level BPE tokenizer (the
converted SmolLM2's ``tokenizer.json`` from ``~/.cache/websailor-gym/models/smollm2-135m`` when setup
made it, else one trained here by :mod:`trainers.subword`), and a simulator plus task file built here
from generated pages (or ``--wiki-dir``/``--tasks``). It measures:

1. rollouts through ``websailor/WikiSim-v0`` with the colocated engine (``trainers.rollout.collect``),
   sampled tokens per second;
2. bare generation of the very prompts the rollout generated from, on the same engine, no environment;
   target: rollout >= 80% of bare;
3. one ``GRPOTrainer.train_step`` with ``--rollout-engine vllm``: wake, weight push, rollout, sleep,
   update (bf16 autocast, fp32 master weights, gradient checkpointing): time, sync time, peak memory;
4. one update on two ``--long-tokens`` (16k) token trajectories, one per forward pass: time, peak memory.

Usage: ``python -m benchmarks.gpu_train`` (GPU and vLLM; under 8 minutes on one H200). Without them it
prints one line saying what to install and exits 2. ``--dry-run`` runs the same code path on CPU with
:class:`trainers.engine_standin.StandInLLM` and a tiny model (a check of the script, not a measurement).
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.gpu_rollout import SIZES, RecordingPolicy

SMOLLM2_DIR = Path("~/.cache/websailor-gym/models/smollm2-135m").expanduser()


def qwen3_template() -> str:
    """Qwen3's chat template as shipped (thinking), from TRL's copy."""
    try:
        import trl
    except ImportError:
        raise ValueError("gpu_train needs TRL's copy of Qwen3's chat template: "
                         "pip install 'websailor-gym[trl]'") from None
    return (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")


def build_tokenizer(kind: str, wiki_dir: Path, vocab_size: int = 4096) -> tuple[Any, str]:
    """A real BPE tokenizer with Qwen3's template; ``kind`` ``smollm2`` (setup's files), ``subword`` (trained
    here on the simulator's text and the turn protocol) or ``auto`` (smollm2 when present)."""
    if kind == "auto":
        kind = "smollm2" if (SMOLLM2_DIR / "tokenizer.json").exists() else "subword"
    if kind == "smollm2":
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(SMOLLM2_DIR)
    else:
        from trainers.subword import train_subword_tokenizer, wiki_corpus

        tok = train_subword_tokenizer(wiki_corpus(wiki_dir), vocab_size=vocab_size)
    tok.chat_template = qwen3_template()
    tok.eos_token = "<|im_end|>"
    if tok.pad_token is None:
        tok.pad_token = "<|endoftext|>" if "<|endoftext|>" in tok.get_vocab() else tok.eos_token
    return tok, kind


def save_model(size: str, tok: Any, out: Path, dtype: torch.dtype) -> Path:
    """A randomly initialized Qwen3 of the given shape for ``tok``, saved with it to ``out``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=len(tok), max_position_embeddings=40960, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
                         torch_dtype="bfloat16", **SIZES[size])
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(dtype).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_simulator(out: Path, pages: int) -> tuple[Path, list[dict]]:
    """A simulator of ``pages`` generated, interlinked pages and one task per page (its code word)."""
    from wiki_sim.build import build

    words = ["amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]
    corpus = out / "pages.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for k in range(pages):
            text = (f"Station {k} is a research station on the coast of {words[k % 10].title()} Bay, founded in "
                    f"{1900 + k % 120}. Its code word is {words[(k * 7) % 10]}-{k}. It exchanges data with "
                    f"Station {(k + 1) % pages} and Station {(k * 3) % pages}. ") * 4
            f.write(json.dumps({"title": f"Station {k}", "text": text}) + "\n")
    wiki = out / "wiki"
    build("jsonl", corpus, wiki, workers=2, progress=False)
    tasks = [{"id": f"s{k}", "question": f"What is the code word of Station {k}?",
              "answer": f"{words[(k * 7) % 10]}-{k}"} for k in range(pages)]
    return wiki, tasks


def make_llm(args: argparse.Namespace, model_dir: Path, tok: Any) -> Any:
    """The colocated engine, asleep: vLLM, or the CPU stand-in for ``--dry-run``."""
    if args.dry_run:
        from trainers.engine_standin import StandInLLM

        llm = StandInLLM(model_dir, tok, dtype=torch.bfloat16)
        llm.sleep(level=2)
        return llm
    from trainers.rollout_engine import make_vllm

    return make_vllm(str(model_dir), seed=0, gpu_memory_utilization=args.gpu_memory_utilization,
                     max_model_len=args.max_model_len, dtype="bfloat16")  # the trainer's --dtype below


def make_trainer(args: argparse.Namespace, model_dir: Path, tok: Any, tasks: list[dict], wiki: Path, llm: Any,
                 out: Path) -> Any:
    from transformers import AutoModelForCausalLM

    from trainers.grpo import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(model=str(model_dir), tasks="-", output_dir=str(out / "run"), env_id="websailor/WikiSim-v0",
                     env_kwargs=json.dumps({"wiki_dir": str(wiki), "tools": ["search", "visit"],
                                            "max_context_tokens": args.max_model_len}),
                     steps=1, batch_size=args.episodes, group_size=args.group_size, micro_batch_size=args.episodes,
                     micro_batch_tokens=args.long_tokens, max_new_tokens=args.max_new_tokens, max_tool_calls=4,
                     learning_rate=1e-6, pool_size=max(args.episodes // args.group_size, 1), save_every=0,
                     device="cpu" if args.dry_run else "cuda", dtype="bfloat16", gradient_checkpointing=True,
                     tensorboard="off", progress=False, chat_template="on", rollout_engine="vllm",
                     vllm_gpu_memory_utilization=args.gpu_memory_utilization, vllm_max_model_len=args.max_model_len,
                     exclude_truncated=False, resume=False)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return GRPOTrainer(cfg, model, tok, tasks, engine_factory=lambda *a, **k: llm)


def _peak_reset(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_gb(device: str) -> float:
    """Peak of torch's allocator since the reset (vLLM's sleep-mode pool included or not, by version)."""
    if device != "cuda":
        return 0.0
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**30


def _device_used_gb(device: str) -> float:
    """Memory in use on the whole device now (every allocator, vLLM's included)."""
    if device != "cuda":
        return 0.0
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def measure_rollout(trainer: Any, tasks: list[dict], args: argparse.Namespace) -> tuple[dict, dict]:
    """Rollouts through the environment, then bare generation of the same prompts, on the awake engine."""
    from envs.tokens import stop_sequences
    from trainers.rollout import RolloutConfig, collect

    trainer.engine.prepare(trainer.model)
    policy = RecordingPolicy(trainer.engine.policy(trainer.tokenizer, seed=0))
    config = RolloutConfig(env_kwargs=dict(json.loads(trainer.config.env_kwargs), tasks=tasks),
                           num_envs=args.episodes, tool_workers=args.episodes, max_new_tokens=args.max_new_tokens,
                           max_total_tokens=args.max_model_len, max_episode_seconds=None, use_chat_template=True)
    try:
        start = time.perf_counter()
        trajs = collect(policy, tasks[: args.episodes], config, progress=False)
        seconds = time.perf_counter() - start
        tokens = sum(sum(t.loss_mask) for t in trajs)
        rollout = {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds, "episodes": len(trajs),
                   "turns": sum(t.num_turns for t in trajs), "tool_calls": sum(t.num_tool_calls for t in trajs)}
        stops = stop_sequences(trainer.tokenizer, use_chat_template=True)
        n, start = 0, time.perf_counter()
        for i in range(0, len(policy.prompts), args.episodes):
            gens = policy.inner.generate(policy.prompts[i:i + args.episodes], max_new_tokens=args.max_new_tokens,
                                         temperature=1.0, top_p=1.0, stop_ids=stops)
            n += sum(len(g.token_ids) for g in gens)
        seconds = time.perf_counter() - start
        bare = {"tokens": n, "seconds": seconds, "tokens_per_s": n / seconds}
    finally:
        trainer.engine.sleep()
    return rollout, bare


def measure_step(trainer: Any, device: str) -> dict:
    """One full GRPO step (wake, weight push, rollout, sleep, update)."""
    _peak_reset(device)
    start = time.perf_counter()
    metrics = trainer.train_step()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_gb": _peak_gb(device), "device_used_gb": _device_used_gb(device),
            "sync_s": metrics.get("engine/sync_s", 0.0),
            "sync_mb": metrics.get("engine/sync_mb", 0.0), "rollout_s": metrics.get("time/rollout_s", 0.0),
            "update_s": metrics.get("time/update_s", 0.0), "train_tokens": metrics.get("train/tokens", 0),
            "mismatch_abs_mean": metrics.get("mismatch/abs_mean", 0.0),
            "mismatch_kl_k3": metrics.get("mismatch/kl_k3", 0.0)}


def measure_long_update(trainer: Any, tokens: int, device: str) -> dict:
    """One update on two ``tokens``-long trajectories (half of each trained on), one per forward pass."""
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(0)
    vocab = len(trainer.tokenizer)
    trajs = []
    for _ in range(2):
        ids = torch.randint(3, vocab, (tokens - 16,), generator=g).tolist()
        mask = [1 if (i // 512) % 2 == 0 else 0 for i in range(len(ids))]
        trajs.append(SimpleNamespace(prompt_ids=list(range(3, 19)), token_ids=ids, loss_mask=mask,
                                     logprobs=[-8.0 if m else 0.0 for m in mask]))
    _peak_reset(device)
    start = time.perf_counter()
    metrics = trainer.update(trajs, [1.0, -1.0], [True, True])
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_gb": _peak_gb(device), "tokens": tokens, "trained": metrics["train/tokens"],
            "finite": not metrics["train/skipped"] or bool(metrics["train/no_signal"])}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, stand-in engine, tiny model: checks the script")
    parser.add_argument("--size", choices=sorted(SIZES), default=None, help="default: qwen3-0.6b (tiny in --dry-run)")
    parser.add_argument("--tokenizer", choices=["auto", "smollm2", "subword"], default="auto")
    parser.add_argument("--subword-vocab", type=int, default=4096, help="ids of the tokenizer trained here")
    parser.add_argument("--wiki-dir", default=None, help="a built simulator (default: build one here)")
    parser.add_argument("--tasks", default=None, help="task JSONL for --wiki-dir (default: the generated pages')")
    parser.add_argument("--pages", type=int, default=None, help="pages of the generated simulator (default 300; 30)")
    parser.add_argument("--episodes", type=int, default=None, help="rollout episodes at once (default 64; 4)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="per turn (default 512; 8)")
    parser.add_argument("--long-tokens", type=int, default=None, help="update context (default 16384; 256)")
    parser.add_argument("--max-model-len", type=int, default=32768)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.35)
    args = parser.parse_args(argv)
    small = args.dry_run
    for name, full, dry in (("size", "qwen3-0.6b", "tiny"), ("pages", 300, 30), ("episodes", 64, 4),
                            ("max_new_tokens", 512, 8), ("long_tokens", 16384, 256)):
        if getattr(args, name) is None:
            setattr(args, name, dry if small else full)
    if small:
        args.group_size = min(args.group_size, 2)
    if args.episodes % args.group_size:
        parser.error(f"--episodes ({args.episodes}) must be a multiple of --group-size ({args.group_size})")
    return args


def run(args: argparse.Namespace, work: Path) -> dict:
    from envs.tasks import load_tasks

    if args.wiki_dir:
        wiki = Path(args.wiki_dir)
        if not args.tasks:
            raise ValueError("--wiki-dir needs --tasks")
        tasks = [t.to_dict() for t in load_tasks(args.tasks)]
    else:
        wiki, tasks = build_simulator(work, args.pages)
    tok, tok_kind = build_tokenizer(args.tokenizer, wiki, args.subword_vocab)
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    model_dir = save_model(args.size, tok, work / "model", dtype)
    llm = make_llm(args, model_dir, tok)
    trainer = make_trainer(args, model_dir, tok, tasks, wiki, llm, work)
    device = "cpu" if args.dry_run else "cuda"
    rollout, bare = measure_rollout(trainer, tasks, args)
    step = measure_step(trainer, device)
    long = measure_long_update(trainer, args.long_tokens, device)
    ratio = rollout["tokens_per_s"] / bare["tokens_per_s"] if bare["tokens_per_s"] else 0.0
    return {"benchmark": "gpu_train", "engine": "standin-cpu" if args.dry_run else "vllm", "size": args.size,
            "vocab": len(tok), "tokenizer": tok_kind, "template": "qwen3", "episodes": args.episodes,
            "max_new_tokens": args.max_new_tokens, "bare_tokens_per_s": round(bare["tokens_per_s"], 1),
            "rollout_tokens_per_s": round(rollout["tokens_per_s"], 1), "rollout_over_bare": round(ratio, 3),
            "target": 0.8, "rollout_turns": rollout["turns"], "rollout_tool_calls": rollout["tool_calls"],
            "step_s": round(step["seconds"], 2), "step_sync_s": round(step["sync_s"], 3),
            "step_sync_mb": round(step["sync_mb"], 1), "step_rollout_s": round(step["rollout_s"], 2),
            "step_update_s": round(step["update_s"], 2), "step_peak_gb": round(step["peak_gb"], 2),
            "device_used_gb_after_step": round(step["device_used_gb"], 2),
            "step_train_tokens": step["train_tokens"], "mismatch_abs_mean": round(step["mismatch_abs_mean"], 5),
            "mismatch_kl_k3": round(step["mismatch_kl_k3"], 6), "long_tokens": long["tokens"],
            "long_update_s": round(long["seconds"], 2), "long_peak_gb": round(long["peak_gb"], 2),
            "long_finite": long["finite"]}


def print_table(r: dict) -> None:
    print(f"{'measure':<34} {'value':>12}")
    rows = [("bare generation tokens/s", r["bare_tokens_per_s"]), ("rollout tokens/s (WikiSim-v0)",
                                                                    r["rollout_tokens_per_s"]),
            ("rollout / bare (target >= 0.8)", r["rollout_over_bare"]), ("GRPO step s", r["step_s"]),
            ("  weight sync s", r["step_sync_s"]), ("  rollout s", r["step_rollout_s"]),
            ("  update s", r["step_update_s"]), ("  peak GiB (torch)", r["step_peak_gb"]),
            ("  device GiB in use after (all)", r["device_used_gb_after_step"]),
            ("  sampler/trainer mean |dlogp|", r["mismatch_abs_mean"]),
            (f"update at {r['long_tokens']} tokens s", r["long_update_s"]),
            ("  peak GiB (torch)", r["long_peak_gb"])]
    for name, value in rows:
        print(f"{name:<34} {value:>12}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.dry_run:
        from trainers.rollout_engine import require_vllm_gpu

        try:
            require_vllm_gpu()
        except ValueError as exc:
            print(f"gpu_train: {exc}; --dry-run checks this script on CPU with a stand-in engine", file=sys.stderr)
            return 2
    else:
        torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="gpu_train-") as tmp:
        try:
            result = run(args, Path(tmp))
        except ValueError as exc:
            print(f"gpu_train: {exc}", file=sys.stderr)
            return 2
    print_table(result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
