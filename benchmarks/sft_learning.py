"""SFT learning curve: a tiny model learns the turn protocol from the heuristic agent's gold trajectories.

Gold data: the heuristic agent (envs.baselines) on title-lookup tasks derived from a built
simulator (envs.derived_tasks), compact environment (trainers.gold), rejection-sampled
(correct answers only). Of the ``--num-tasks`` tasks the last ``--heldout`` are the test
set, the ``--val`` before them the validation set, the rest train. The model is a randomly
initialized 2-layer Qwen2 (trainers.tiny_lm) over a byte-level BPE trained here on the
simulator's pages and the training transcripts (trainers.subword; ``--tokenizer bytes`` for
ByT5). A random model cannot copy a question or a URL, which every tool call needs, so it
first gets ``--pretrain-steps`` of language-model pretraining on the training transcripts
(``SFTConfig(loss_on="all")``: every token), the stand-in for the pretrained model an SFT
normally starts from; then ``--steps`` of SFT proper (assistant tokens only).

Every ``--eval-every`` SFT steps the share of strictly well-formed turns
(envs.protocol.parse_turn) the model writes on the *validation* transcripts is measured
(teacher-forced contexts; the untrained model at step 0); the defaults were chosen on
these. The *test* transcripts are scored once, after training: that is the headline
number. The trained model then also plays ``--episodes`` test tasks in the environment
(trainers.sft_eval.format_validity). Writes ``learning_curve.png`` and ``curve.json``
into ``--out-dir``; prints a table and, last, one line of JSON.

    python -m benchmarks.sft_learning --wiki-dir data/wiki            # builds the gold data
    python -m benchmarks.sft_learning --gold gold.jsonl --device cuda # from a saved gold file
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def gold_records(wiki_dir: str, num_tasks: int, seed: int) -> list[dict]:
    from envs.derived_tasks import derive_tasks
    from trainers.gold import heuristic_trajectories, make_env

    tasks = [t.to_dict() for t in derive_tasks(wiki_dir, num_tasks, seed=seed)]
    env = make_env(wiki_dir, tasks)
    try:
        return heuristic_trajectories(env, len(tasks))
    finally:
        env.close()


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wiki-dir", default="data/wiki")
    p.add_argument("--gold", help="gold trajectory JSONL (skips building it from --wiki-dir)")
    p.add_argument("--num-tasks", type=int, default=2400, help="derived tasks in all (train + val + test)")
    p.add_argument("--heldout", type=int, default=100, help="the last tasks: the test set, scored once at the end")
    p.add_argument("--val", type=int, default=40, help="the tasks before the test set: the learning curve's")
    p.add_argument("--pretrain-steps", type=int, default=1000,
                   help="language-model steps on every token of the training transcripts before the SFT (0: none)")
    p.add_argument("--steps", type=int, default=1000, help="SFT steps (assistant tokens only)")
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--tokenizer", choices=["subword", "bytes"], default="subword",
                   help="subword: byte-level BPE trained here on the simulator's pages and the training "
                        "transcripts (trainers.subword); bytes: ByT5Tokenizer")
    p.add_argument("--vocab-size", type=int, default=2048, help="subword vocabulary size")
    p.add_argument("--episodes", type=int, default=20,
                   help="test tasks played in the environment after training (0: skip)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=300,
                   help="tokens per generated turn (the longest gold turn is ~240 subword tokens)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (on two cores shared with other jobs one thread ran a training "
                        "step several times faster than two; 0: torch's default)")
    p.add_argument("--out-dir", default="runs/sft_learning")
    args = p.parse_args(argv)
    for name in ("num_tasks", "heldout", "steps", "eval_every", "batch_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.pretrain_steps < 0 or args.val < 1:
        p.error(f"--pretrain-steps must be >= 0 and --val >= 1, got {args.pretrain_steps} and {args.val}")

    from envs.trajectory import read_trajectories, write_trajectories
    from trainers.sft import SFTConfig, train
    from trainers.sft_eval import format_validity_on_transcripts
    from trainers.tiny_lm import tiny_lm

    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records = list(read_trajectories(args.gold)) if args.gold else gold_records(args.wiki_dir, args.num_tasks, 0)
    if len(records) <= args.heldout + args.val:
        raise SystemExit(f"error: {len(records)} gold trajectories leave none to train on after --heldout "
                         f"{args.heldout} and --val {args.val}; raise --num-tasks")
    split = len(records) - args.heldout - args.val
    train_recs = records[:split]
    val = [r["messages"] for r in records[split:split + args.val] if r["is_correct"]]
    test = [r["messages"] for r in records[split + args.val:] if r["is_correct"]]
    write_trajectories(out / "train.jsonl", train_recs)
    tok = None
    if args.tokenizer == "subword":
        import itertools

        from trainers.subword import train_subword_tokenizer, transcript_corpus, wiki_corpus

        pages = wiki_corpus(args.wiki_dir) if not args.gold or Path(args.wiki_dir).is_dir() else []
        tok = train_subword_tokenizer(itertools.chain(pages, transcript_corpus(train_recs, repeat=10)),
                                      vocab_size=args.vocab_size)
    model, tok = tiny_lm(layers=args.layers, hidden=args.hidden, heads=4, seed=0, tokenizer=tok)
    curve: list[dict] = []

    def evaluate(step: int) -> None:
        r = format_validity_on_transcripts(model, tok, val, max_new_tokens=args.max_new_tokens)
        curve.append({"step": step, "format_valid": r["rate"], "turns": r["turns"]})
        print(f"step {step:5d}  validation format-valid {r['rate']:.3f} ({r['strict_turns']}/{r['turns']})",
              flush=True)

    model.to(args.device)
    evaluate(0)
    losses: dict[str, list[tuple[int, float]]] = {"pretrain": [], "sft": []}

    def run(stage: str, steps: int, loss_on: str, on_step) -> tuple[object, float]:
        def record(m: dict) -> None:
            if m.get("loss/sft") is not None:
                losses[stage].append((m["step"], m["loss/sft"]))
            if on_step is not None:
                on_step(m)

        config = SFTConfig(data=[str(out / "train.jsonl")], model="-", output_dir=str(out / stage), lr=args.lr,
                           min_lr=args.lr * 0.01, max_steps=steps, batch_size=args.batch_size, micro_batch_size=1,
                           warmup_ratio=0.05, resume=False, save_every=10 ** 9, tensorboard="off",
                           device=args.device, loss_on=loss_on)
        started = time.perf_counter()
        result = train(config, model=model, tokenizer=tok, on_step=record)
        return result, time.perf_counter() - started

    pre_seconds = 0.0
    if args.pretrain_steps:
        _, pre_seconds = run("pretrain", args.pretrain_steps, "all", None)
        print(f"pretrained {args.pretrain_steps} steps in {pre_seconds:.0f} s, loss "
              f"{losses['pretrain'][-1][1]:.3f} (all tokens)", flush=True)
        evaluate(args.pretrain_steps)  # before any SFT: what pretraining on the transcripts alone gives
    result, seconds = run("sft", args.steps, "assistant",
                          lambda m: evaluate(args.pretrain_steps + m["step"]) if m["step"] % args.eval_every == 0
                          else None)
    if curve[-1]["step"] != args.pretrain_steps + args.steps:
        evaluate(args.pretrain_steps + args.steps)
    scored = format_validity_on_transcripts(model, tok, test, max_new_tokens=args.max_new_tokens)
    print(f"test: format-valid {scored['rate']:.3f} ({scored['strict_turns']}/{scored['turns']})", flush=True)
    played = None
    if args.episodes > 0 and Path(args.wiki_dir).is_dir():
        from trainers.gold import make_env
        from trainers.sft_eval import format_validity

        tasks = [r["task"] for r in records[split + args.val:]][:args.episodes]
        env = make_env(args.wiki_dir, tasks)
        try:
            played = format_validity(model, tok, env, list(range(len(tasks))),
                                     max_new_tokens=args.max_new_tokens, max_turns=4)
        finally:
            env.close()
        print(f"played {len(tasks)} test tasks: format-valid {played['rate']:.3f} "
              f"({played['strict_turns']}/{played['turns']}), {played['answers']} answers", flush=True)
    _plot(out / "learning_curve.png", losses, curve, args.pretrain_steps)
    summary = {"benchmark": "sft_learning", "device": args.device, "pretrain_steps": args.pretrain_steps,
               "steps": args.steps, "hidden": args.hidden,
               "train_trajectories": result.filter_report["kept"], "val_transcripts": len(val),
               "test_transcripts": len(test), "test_turns": scored["turns"],
               "format_valid_untrained": curve[0]["format_valid"],
               "format_valid_pretrained_only": curve[1]["format_valid"] if args.pretrain_steps else None,
               "format_valid_val": curve[-1]["format_valid"],
               "format_valid_sft": scored["rate"], "final_loss": result.final_loss,
               "train_seconds": round(pre_seconds + seconds, 1),
               "tokenizer": args.tokenizer, "vocab_size": len(tok), "layers": args.layers, "lr": args.lr,
               "batch_size": args.batch_size,
               "played_format_valid": played["rate"] if played else None,
               "played_turns": played["turns"] if played else None}
    (out / "curve.json").write_text(json.dumps({"losses": losses, "eval": curve, "summary": summary}) + "\n")
    rows = [("untrained", curve[0]["format_valid"], "")]
    if args.pretrain_steps:
        rows.append(("pretrained", curve[1]["format_valid"], ""))
    rows.append(("SFT", curve[-1]["format_valid"], f"{scored['rate']:.3f}"))
    print(f"{'model':<12}{'validation':>12}{'test':>8}")
    for name, rate, test_rate in rows:
        print(f"{name:<12}{rate:>12.3f}{test_rate:>8}")
    print(json.dumps(summary))
    return summary


def _plot(path: Path, losses: dict, curve: list, pretrain_steps: int) -> None:
    """Training loss of both stages against the optimizer step, and the validation points
    (``curve``: global steps) on a second axis."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'websailor-gym[plots]'): no PNG written")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    pre = losses["pretrain"]
    if pre:
        ax.plot([s for s, _ in pre], [v for _, v in pre], color="tab:gray", lw=0.8, label="pretraining (all tokens)")
        ax.axvline(pretrain_steps, color="tab:gray", ls=":", lw=0.8)
    sft = losses["sft"]
    ax.plot([pretrain_steps + s for s, _ in sft], [v for _, v in sft], color="tab:blue", lw=0.8,
            label="SFT (assistant tokens)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss", color="tab:blue")
    ax.legend(loc="upper center", fontsize=8)
    ax2 = ax.twinx()
    ax2.plot([c["step"] for c in curve], [c["format_valid"] for c in curve], "o-", color="tab:red")
    ax2.set_ylabel("format-valid turns (validation)", color="tab:red")
    ax2.set_ylim(0, 1.05)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
