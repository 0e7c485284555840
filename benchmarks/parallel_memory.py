"""Training state per rank under ``--parallel ddp`` and ``--parallel fsdp``, side by side (gloo on CPU).

Each mode runs in its own ``torchrun`` job of ``--procs`` processes: a config-built Qwen2 (random
weights, ``--layers`` x ``--hidden``, vocabulary ``--vocab``), wrapped by :func:`trainers.parallel.wrap`,
AdamW, ``--steps`` updates on random ``(1, --tokens)`` batches (the first is warm-up). Counted per
rank: the bytes of the parameters, gradients and AdamW moments this rank holds (a DTensor's local
shard; DDP's gradient buckets, another gradient-sized buffer, are not counted), and the median
update time. FSDP should hold about ``1/procs`` of DDP's state; its update gathers and reduces every
layer, so on CPU with gloo it is slower (on GPUs NCCL overlaps that with compute).

    python -m benchmarks.parallel_memory [--procs 2 --layers 4 --hidden 256 --vocab 8000 --tokens 256 --steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("ddp", "fsdp")


def _local_bytes(tensors) -> int:
    from torch.distributed.tensor import DTensor

    total = 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if isinstance(t, DTensor) else t
        total += t.numel() * t.element_size()
    return total


def worker(args: argparse.Namespace) -> None:
    import resource

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainers import parallel
    from trainers.grpo_state import DistInfo

    torch.set_num_threads(1)
    dist = DistInfo.from_env("cpu")
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=3 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=4 * args.tokens, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    wrapped = parallel.wrap(model, dist, args.worker)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(dist.rank)
    times = []
    for _ in range(args.steps):
        ids = torch.randint(0, args.vocab, (1, args.tokens), generator=gen)
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(wrapped(input_ids=ids).logits[0, :-1].float(), ids[0, 1:])
        loss.backward()
        parallel.clip_grad_norm(list(model.parameters()), 1.0)
        optimizer.step()
        grads = _local_bytes(p.grad for p in model.parameters())
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    moments = _local_bytes(v for s in optimizer.state.values() for k, v in s.items() if k != "step")
    row = {"mode": args.worker, "rank": dist.rank, "params": _local_bytes(model.parameters()), "grads": grads,
           "adam": moments, "update_s": sorted(times[1:])[len(times[1:]) // 2],
           "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    Path(args.out, f"{args.worker}-{dist.rank}.json").write_text(json.dumps(row))
    dist.destroy()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return {}
    if args.procs < 2 or args.steps < 2:
        parser.error(f"expected --procs >= 2 and --steps >= 2, got {args.procs} and {args.steps}")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(args.procs),
                   "-m", "benchmarks.parallel_memory", "--worker", mode, "--out", tmp,
                   *[f"--{k}={getattr(args, k)}" for k in ("layers", "hidden", "vocab", "tokens", "steps")]]
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise SystemExit(f"parallel_memory: the {mode} job failed: {proc.stderr.strip().splitlines()[-1:]}")
            ranks = [json.loads(Path(tmp, f"{mode}-{r}.json").read_text()) for r in range(args.procs)]
            rows[mode] = {key: max(r[key] for r in ranks) for key in ("params", "grads", "adam", "update_s",
                                                                        "maxrss_mb")}
    print(f"{'mode':6} {'params MB':>10} {'grads MB':>10} {'adam MB':>10} {'state MB':>10} {'update s':>9} "
          f"{'max RSS MB':>11}   (per rank, the largest of {args.procs})")
    for mode, r in rows.items():
        r["state"] = r["params"] + r["grads"] + r["adam"]
        print(f"{mode:6} {r['params'] / 2**20:10.1f} {r['grads'] / 2**20:10.1f} {r['adam'] / 2**20:10.1f} "
              f"{r['state'] / 2**20:10.1f} {r['update_s']:9.3f} {r['maxrss_mb']:11.0f}")
    result = {"benchmark": "parallel_memory", "procs": args.procs, "layers": args.layers, "hidden": args.hidden,
              "vocab": args.vocab, "tokens": args.tokens,
              **{f"{m}_state_mb": round(rows[m]["state"] / 2**20, 2) for m in MODES},
              **{f"{m}_update_s": round(rows[m]["update_s"], 4) for m in MODES},
              "fsdp_over_ddp_state": round(rows["fsdp"]["state"] / rows["ddp"]["state"], 3),
              "fsdp_over_ddp_time": round(rows["fsdp"]["update_s"] / rows["ddp"]["update_s"], 3)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
