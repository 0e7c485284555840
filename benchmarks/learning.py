"""Learning benchmark: the main job's stages with more data and steps, and whether each stage helps.

Runs :func:`websailor.pipeline.run_pipeline` (few-shot pretrained model, SFT on gold title
lookups, GRPO on probe-selected tasks, evaluation, with the random and heuristic baselines)
into ``--out-dir/run`` (resumable: run the same command again after an interruption), then
scores the held-out episodes per task family, title lookups (``lookup-*`` levels) and
synthesized SailorFog-QA-V2 tasks (``sailorfog``), with 95% Wilson intervals, draws
``learning-MODE.png`` (SFT loss, GRPO reward and signal share, held-out success with intervals) and
checks the targets:

- SFT > few-shot (the 95% interval of the difference above 0), on all held-out tasks;
- SFT+GRPO > SFT (likewise; the point estimates are reported too);
- on title lookups, SFT+GRPO >= the heuristic baseline (point estimates).

Sizes: the full run (default) is meant to take at most about 2 hours on 2 CPU cores;
``--quick`` uses the main job's defaults (about 20 minutes on an idle 2-core machine; ``--run-dir runs/default``
reuses the main job's run); ``--smoke`` the tiny config-built model at the tests' sizes.
Progress bars go to stderr; in the background::

    nohup python -m benchmarks.learning --wiki-dir data/wiki > learning.log 2>&1 &

Prints a table and, last, one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

FULL = dict(lookup_tasks=1000, synth_tasks=60, heldout=60, synth_heldout=20, sft_steps=120, sft_batch=4,
            train_layers=6, grpo_steps=24, grpo_tasks_per_step=4, group_size=6, probe=12, grpo_lr=1e-4)
"""The full benchmark's sizes (``--quick``: the pipeline's defaults)."""
FAMILIES = {"title lookups": ("lookup-description", "lookup-lead"), "synthesized": ("sailorfog",)}
SMOKE = dict(model="tiny", lookup_tasks=12, heldout=2, synth_tasks=4, synth_heldout=1, sft_steps=2, sft_batch=2,
             grpo_steps=1, grpo_tasks_per_step=2, group_size=2, probe=1, max_new_tokens=24)
"""``--smoke``: the tiny config-built model at the tests' sizes (checks the machinery in a minute or two)."""
POLICIES = {"few-shot": "fewshot", "SFT": "sft", "SFT+GRPO": "grpo", "heuristic": "heuristic", "random": "random"}


def family_stats(run_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``{family: {policy label: stats}}`` from the held-out trajectories (plus ``all``)."""
    from websailor.recipe import policy_stats
    from websailor.report import read_jsonl

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, name in POLICIES.items():
        trajectories = read_jsonl(run_dir / "eval" / f"{name}.trajectories.jsonl")
        if not trajectories:
            continue
        out.setdefault("all", {})[label] = policy_stats(trajectories, {})
        for family, levels in FAMILIES.items():
            subset = [t for t in trajectories if (t.get("task") or {}).get("level") in levels]
            if subset:
                out.setdefault(family, {})[label] = policy_stats(subset, {})
    return out


def targets(stats: dict[str, dict[str, dict[str, Any]]]) -> dict[str, bool | None]:
    from websailor.recipe import better

    every, lookups = stats.get("all", {}), stats.get("title lookups", {})

    def both(a: str, b: str, table: dict) -> bool:
        return a in table and b in table

    return {
        "sft_gt_fewshot": better(every["SFT"], every["few-shot"]) if both("SFT", "few-shot", every) else None,
        "sft_gt_fewshot_well_formed": better(every["SFT"], every["few-shot"], "well_formed_turns", "turns")
        if both("SFT", "few-shot", every) else None,
        "grpo_gt_sft": better(every["SFT+GRPO"], every["SFT"]) if both("SFT+GRPO", "SFT", every) else None,
        "grpo_point_ge_sft": every["SFT+GRPO"]["success"] >= every["SFT"]["success"]
        if both("SFT+GRPO", "SFT", every) else None,
        "grpo_ge_heuristic_lookups": lookups["SFT+GRPO"]["success"] >= lookups["heuristic"]["success"]
        if both("SFT+GRPO", "heuristic", lookups) else None,
    }


def draw(run_dir: Path, stats: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from websailor.report import read_jsonl

    sft = [r for r in read_jsonl(run_dir / "sft" / "metrics.jsonl") if isinstance(r.get("loss/sft"), (int, float))]
    grpo = read_jsonl(run_dir / "grpo" / "metrics.jsonl")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    axes[0].plot([r.get("step") for r in sft], [r["loss/sft"] for r in sft], marker=".")
    axes[0].set(title="SFT loss (assistant tokens)", xlabel="step")
    steps = [r.get("step") for r in grpo]
    axes[1].plot(steps, [r.get("reward/mean") for r in grpo], marker="o", label="mean reward")
    axes[1].plot(steps, [1 - (r.get("groups/all_equal") or 0) / max(1, r.get("groups/groups") or 1) for r in grpo],
                 marker="s", label="groups with signal")
    axes[1].set(title="GRPO", xlabel="step", ylim=(-0.05, 1.05))
    axes[1].legend(fontsize=8)
    families = [f for f in ("title lookups", "synthesized") if f in stats]
    labels = [p for p in POLICIES if any(p in stats[f] for f in families)]
    width = 0.8 / max(1, len(families))
    for k, family in enumerate(families):
        xs, ys, lo, hi = [], [], [], []
        for i, label in enumerate(labels):
            s = stats[family].get(label)
            if s:
                xs.append(i + k * width)
                ys.append(s["success"])
                lo.append(s["success"] - s["success_ci95"][0])
                hi.append(s["success_ci95"][1] - s["success"])
        axes[2].bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, label=family)
    axes[2].set_xticks([i + width * (len(families) - 1) / 2 for i in range(len(labels))], labels)
    axes[2].set(title="held-out success (95% intervals)", ylim=(0, 1))
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def overrides(items: list[str]) -> dict[str, Any]:
    """``["sft_steps=60", ...]`` as pipeline settings, each converted to its field's type."""
    from dataclasses import fields

    from websailor.pipeline import PipelineConfig

    types = {f.name: f.type for f in fields(PipelineConfig)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in types or key in ("out", "wiki_dir", "resume", "overwrite", "progress"):
            raise ValueError(f"--set expects KEY=VALUE with KEY a pipeline setting (e.g. sft_steps=60), got {item!r}")
        kind = {"int": int, "float": float, "str": str}.get(str(types[key]).split()[0], str)
        try:
            out[key] = kind(value)
        except ValueError:
            raise ValueError(f"--set {key} expects {kind.__name__}, got {value!r}") from None
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wiki-dir", default="data/wiki")
    p.add_argument("--out-dir", default="runs/learning")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--quick", action="store_true", help="the main job's sizes (about 20 minutes on an idle 2-core machine)")
    p.add_argument("--smoke", action="store_true", help="the tiny config-built model at the tests' sizes (no learning)")
    p.add_argument("--run-dir", help="the pipeline run to use or resume (default: OUT_DIR/run or OUT_DIR/run-quick); "
                   "with --quick, the main job's run directory (runs/default) is reused as it is")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one pipeline setting of the chosen sizes, e.g. --set sft_steps=60 (repeatable; "
                        "to size a run down for a loaded machine)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    from websailor.pipeline import PipelineConfig, run_pipeline

    out = Path(args.out_dir)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    run_dir = Path(args.run_dir) if args.run_dir else out / f"run-{mode}"
    sizes = {"smoke": SMOKE, "quick": {"model": args.model}, "full": {"model": args.model, **FULL}}[mode]
    try:
        sizes = {**sizes, **overrides(args.set)}
    except ValueError as exc:
        p.error(str(exc))
    config = PipelineConfig(out=str(run_dir), wiki_dir=args.wiki_dir, seed=args.seed, resume=True,
                            progress=not args.no_progress, **sizes)
    start = time.perf_counter()
    state = run_pipeline(config)
    seconds = time.perf_counter() - start
    stats = family_stats(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    draw(run_dir, stats, out / f"learning-{mode}.png")
    print(f"\n{'family':<14} {'policy':<10} {'success':>7}  {'95% interval':<14} {'well-formed':>11}  episodes")
    for family, table in stats.items():
        for label, s in table.items():
            lo, hi = s["success_ci95"]
            print(f"{family:<14} {label:<10} {s['success']:>7.3f}  [{lo:.2f}, {hi:.2f}]   {s['well_formed_turns']:>11.3f}"
                  f"  {s['episodes']}")
    grpo = (state["stages"].get("grpo") or {}).get("result") or {}
    met = targets(stats)
    print("targets: " + ", ".join(f"{k}={v}" for k, v in met.items()))
    result = {"benchmark": "learning", "mode": mode, "model": config.model, "seconds": round(seconds, 1),
              "stage_seconds": {k: (v or {}).get("seconds") for k, v in state["stages"].items()},
              "success": {f: {lbl: round(s["success"], 3) for lbl, s in t.items()} for f, t in stats.items()},
              "success_ci95": {f: {lbl: [round(x, 3) for x in s["success_ci95"]] for lbl, s in t.items()}
                               for f, t in stats.items()},
              "well_formed": {lbl: round(s["well_formed_turns"], 3) for lbl, s in stats.get("all", {}).items()},
              "grpo_steps": grpo.get("steps"), "grpo_signal_steps": grpo.get("signal_steps"), "targets": met}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
