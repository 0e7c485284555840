"""Peak memory per token of one GRPO update on CPU: the chunked log-probability path against the naive one.

One update = forward of a causal LM over a (1, T) sequence, per-token log-probabilities of the
sampled ids at the sampling temperature, the clipped policy loss, backward, and the entropy metric
(what ``GRPOTrainer._micro_step`` does). Variants, each in a fresh process (peak RSS is per process):

- ``naive``: the path before chunking: the whole ``(T, V)`` logits turned into fp32, divided by the
  temperature, ``log_softmax`` over the full vocabulary (kept for backward), and the entropy of a
  temperature-scaled copy;
- ``chunked``: what the trainer does: logits of the predicting positions only
  (:func:`trainers.memory.update_logits`: no ``logits[:, :-1]`` slice, whose backward made a second
  full-size gradient), log-probabilities and entropy from the same fp32 pieces of ``LOGPROB_CHUNK``
  positions (:func:`trainers.losses.token_logprobs_and_entropy`, a custom backward);
- ``chunked+ckpt``: the same with gradient checkpointing of the layers;
- ``chunked+bf16``: chunked, forward under bf16 autocast with fp32 master weights (``--dtype bfloat16``):
  the logits and their gradient are bf16.

The model has a real LM's shape ratio where it matters here: a vocabulary far wider than the hidden
size (Qwen3: 151,936 x 1,024 for 0.6B), so the full-vocabulary tensors dominate the update.
``--shape smollm2`` builds SmolLM2-135M's shape instead (49,152 x 576, MLP 1,536, 30 layers, 3 key-value
heads; random weights, nothing downloaded), where the layers' activations weigh as much as the logits.
Peak = the process's maximum RSS during the update minus its RSS just before (model and inputs built).
Each chunked variant is also compared with the trainer's estimate (``trainers.memory``: bytes per token
times the tokens, plus the gradients and the chunk's work), which sizes the default token budget:
``estimate_ratio`` = measured / estimated peak should stay below 1.

    python -m benchmarks.update_memory [--tokens 4096 --vocab 32000 --hidden 128 --layers 2 --chunk 1024]
    python -m benchmarks.update_memory --shape smollm2 --tokens 2048

The chunked path saves nothing when the sequence fits in one chunk (``--tokens 1024 --chunk 1024``:
little); what stays per token is the model's own logits and their gradient (about 8 bytes per
vocabulary entry in fp32, about 4 with bf16 autocast). Update time is the naive path's (measured:
10.45 s against 10.55 s at T=4096, V=32,000, 1 thread; a first version that checkpointed each chunk
took 2.2x).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from typing import Any

VARIANTS = ("naive", "chunked", "chunked+ckpt", "chunked+bf16")


def _rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * (resource.getpagesize() // 1024)


def _naive_logprobs(logits: Any, ids: Any, temperature: float) -> Any:
    import torch

    return torch.log_softmax(logits.float() / temperature, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def _naive_entropy(logits: Any) -> Any:
    import torch

    logp = torch.log_softmax(logits.float(), -1)
    return -(logp.exp() * logp).sum(-1)


SMOLLM2 = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
           "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64}
"""SmolLM2-135M-Instruct's config.json, the sizes the update's memory depends on."""


def _model(shape: str, tokens: int, vocab: int, hidden: int, layers: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    if shape == "smollm2":
        return LlamaForCausalLM(LlamaConfig(**SMOLLM2, max_position_embeddings=max(tokens + 8, 8192),
                                            tie_word_embeddings=True))
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=tokens + 8,
                      tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg)


def measure(variant: str, tokens: int, vocab: int, hidden: int, layers: int, chunk: int,
            shape: str = "tiny") -> dict[str, Any]:
    import time

    import torch

    from trainers import memory
    from trainers.losses import masked_sum, policy_loss, token_logprobs_and_entropy
    from trainers.memory import enable_gradient_checkpointing

    torch.set_num_threads(1)
    model = _model(shape, tokens, vocab, hidden, layers).train()
    vocab = model.config.vocab_size
    if variant == "chunked+ckpt":
        enable_gradient_checkpointing(model)
    ids = torch.randint(0, vocab, (1, tokens))
    mask = torch.ones(1, tokens - 1)
    mask[:, : tokens // 8] = 0  # a prompt
    old = torch.full((1, tokens - 1), -3.0)
    adv = torch.tensor([1.0])
    temperature = 0.8
    before = _rss_kb()
    start = time.perf_counter()
    from trainers.precision import autocast

    dtype = "bfloat16" if variant == "chunked+bf16" else "float32"
    with autocast("cpu", dtype):
        if variant == "naive":
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[:, :-1]
        else:  # the trainer's: only the positions that predict a token, no sliced copy
            logits = memory.update_logits(model, ids, torch.ones_like(ids), 0, share_prefix=False)
    targets = ids[:, 1:]
    if variant == "naive":
        logp = _naive_logprobs(logits, targets, temperature)
    else:  # the entropy from the same pieces (the trainer's metric)
        logp, entropy = token_logprobs_and_entropy(logits, targets, temperature, chunk_size=chunk)
    loss = policy_loss(logp, old, adv, mask)
    loss.backward()
    with torch.no_grad():
        if variant == "naive":
            ent = masked_sum(_naive_entropy(logits.detach() / temperature), mask)
        else:
            ent = masked_sum(entropy, mask)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    grad = float(sum(p.grad.double().norm() ** 2 for p in model.parameters() if p.grad is not None) ** 0.5)
    model_shape = memory.model_shape(model)
    estimate = (memory.bytes_per_token(model_shape, dtype, variant == "chunked+ckpt") * tokens
                + memory.fixed_bytes(model_shape, dtype, optimizer_ready=True, chunk=chunk))
    return {"variant": variant, "tokens": tokens, "vocab": vocab, "peak_mb": peak / 1024,
            "estimate_mb": estimate / 2**20, "estimate_ratio": peak * 1024 / estimate,
            "bytes_per_token": peak * 1024 / tokens, "bytes_per_token_per_vocab": peak * 1024 / tokens / vocab,
            "seconds": seconds, "loss": float(loss), "entropy": float(ent), "grad_norm": grad}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=1024, help="positions per chunk (trainers.losses.LOGPROB_CHUNK)")
    parser.add_argument("--shape", choices=("tiny", "smollm2"), default="tiny",
                        help="tiny: a Qwen2 of --vocab, --hidden, --layers; smollm2: SmolLM2-135M's shape")
    parser.add_argument("--variant", choices=VARIANTS, help="measure one variant in this process (internal)")
    args = parser.parse_args(argv)
    dims = (args.tokens, args.vocab, args.hidden, args.layers, args.chunk)
    if args.variant:
        print(json.dumps(measure(args.variant, *dims, shape=args.shape)))
        return {}
    if args.shape == "smollm2":
        args.vocab, args.hidden, args.layers = SMOLLM2["vocab_size"], SMOLLM2["hidden_size"], SMOLLM2["num_hidden_layers"]
    rows = []
    for variant in VARIANTS:
        cmd = [sys.executable, "-m", "benchmarks.update_memory", "--variant", variant, "--tokens", str(args.tokens),
               "--vocab", str(args.vocab), "--hidden", str(args.hidden), "--layers", str(args.layers),
               "--chunk", str(args.chunk), "--shape", args.shape]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    naive = rows[0]
    print(f"one GRPO update, T={args.tokens}, V={args.vocab}, hidden={args.hidden}, layers={args.layers}, "
          f"chunk={args.chunk} (CPU, 1 thread)")
    print(f"{'variant':<14}{'peak MB':>10}{'B/token':>10}{'B/token/V':>11}{'vs naive':>10}{'s':>8}{'grad norm':>12}"
          f"{'estimate MB':>13}{'meas/est':>10}")
    for r in rows:
        est = (f"{r['estimate_mb']:>13.0f}{r['estimate_ratio']:>10.2f}" if r["variant"] != "naive" else "")
        print(f"{r['variant']:<14}{r['peak_mb']:>10.0f}{r['bytes_per_token']:>10.0f}"
              f"{r['bytes_per_token_per_vocab']:>11.2f}{r['peak_mb'] / naive['peak_mb']:>10.2f}{r['seconds']:>8.2f}"
              f"{r['grad_norm']:>12.5f}{est}")
    same = all(abs(r["grad_norm"] - naive["grad_norm"]) <= 1e-4 * max(naive["grad_norm"], 1e-12) for r in rows[:3])
    close = abs(rows[3]["grad_norm"] - naive["grad_norm"]) <= 0.05 * max(naive["grad_norm"], 1e-12)
    under = all(r["estimate_ratio"] <= 1.0 for r in rows[1:])
    result = {"benchmark": "update_memory", "shape": args.shape, "tokens": args.tokens, "vocab": args.vocab,
              "chunk": args.chunk, "peak_mb": {r["variant"]: round(r["peak_mb"], 1) for r in rows},
              "estimate_ratio": {r["variant"]: round(r["estimate_ratio"], 3) for r in rows[1:]},
              "estimate_covers_peak": under,
              "bytes_per_token_per_vocab": {r["variant"]: round(r["bytes_per_token_per_vocab"], 2) for r in rows},
              "chunked_vs_naive": round(rows[1]["peak_mb"] / naive["peak_mb"], 3),
              "same_gradient": same, "bf16_gradient_within_5pct": close,
              "targets_met": same and close and under and rows[1]["peak_mb"] < naive["peak_mb"]}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
