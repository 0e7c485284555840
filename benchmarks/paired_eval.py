"""Saved models compared on fresh held-out tasks, paired: a confirmation that no earlier choice has seen.

A dose run (:mod:`benchmarks.grpo_dose`) picks its best dose on the held-out tasks it reports, so its best
difference is chosen after the fact. This benchmark plays every named model on ``--tasks`` title lookups
that no task of the run (train, held out, synthesized) and no ``--exclude`` file asks for (half short
descriptions, half first sentences, drawn with a seed of their own), greedily once and ``--samples`` times
at the run's temperature, with the scripted heuristic on the same tasks. Each model is paired against
``--reference`` decoded the same way and decoded greedily: the mean per-task difference, its 95% paired
bootstrap interval and the verdict (:func:`websailor.recipe.paired_interval`, ``paired_verdict``), overall
and per level.

    python -m benchmarks.paired_eval                  # the main job's SFT and GRPO models (runs/default)
    python -m benchmarks.paired_eval --run-dir RUN --out-dir OUT --reference sft \\
        --model sft=DOSE/sft/model --model grpo=DOSE/models/step-32 --tasks 400 --exclude DOSE/extra-heldout-200.jsonl

Prints a table and, last, one JSON line ``{"benchmark": "paired_eval", ...}``; draws ``OUT/paired_eval.png``.
Resumable: evaluations are cached per model name in ``OUT/eval`` (a name must keep its model folder).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

SEED_OFFSET = 104_729
"""Added to the run's seed for the fresh tasks (the dose run's extra held-out tasks use 7,919)."""
LEVELS = ("lookup-description", "lookup-lead")
MODELS_FILE = "models.json"
"""``OUT/models.json``: the model folder each name was evaluated from."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


def parse_models(specs: list[str]) -> dict[str, str]:
    """``["name=folder", ...]`` as ``{name: folder}`` (ValueError with a one-line reason)."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, folder = spec.partition("=")
        if not sep or not _NAME.match(name) or not folder:
            raise ValueError(f"--model expects NAME=FOLDER with a name of letters, digits and _.+-, got {spec!r}")
        if name in out or name == "heuristic":
            raise ValueError(f"--model name {name!r} is given twice or is reserved (heuristic)")
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(f"--model {name}: {folder} holds no saved model (config.json)")
        out[name] = folder
    if len(out) < 2:
        raise ValueError(f"--model is needed at least twice (a reference and a model to compare), got {len(out)}")
    return out


def check_names(out: Path, models: dict[str, str]) -> None:
    """Refuse a name that an earlier run of ``out`` evaluated from another folder; record the names."""
    file = out / MODELS_FILE
    try:
        known = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
    except (OSError, ValueError):
        known = None
    if not isinstance(known, dict) or not all(isinstance(v, str) for v in known.values()):
        raise ValueError(f"{file} is damaged (not a JSON object of model folders): use another --out-dir")
    for name, folder in models.items():
        if name in known and Path(known[name]).resolve() != Path(folder).resolve():
            raise ValueError(f"--model {name} was evaluated in {out} from {known[name]}, not {folder}: "
                             "give the new folder another name")
    from websailor.stages import write_json

    write_json(file, {**known, **models})


def fresh_lookups(config: Any, run_dir: Path, excluded: list[Path], n: int, out: Path) -> list[dict[str, Any]]:
    """``n`` title lookups, the two levels alternating, on no page that the run's tasks or an ``excluded``
    task file asks for; written once to ``out/tasks/heldout.jsonl`` and read from there after."""
    from websailor import recipe, stages

    file = out / "tasks" / "heldout.jsonl"
    if file.is_file():
        tasks = stages.read_jsonl(file)
        if len(tasks) != n:
            raise ValueError(f"{out} holds {len(tasks)} fresh tasks, not {n}: use --tasks {len(tasks)} or another "
                             "--out-dir")
        return tasks
    used: set[str] = set()
    for path in [run_dir / "tasks" / "all.jsonl", *excluded]:
        used |= {str(t.get("answer")) for t in stages.read_jsonl(path)}
    pool = recipe.lookup_tasks(config.wiki_dir, 4 * n + len(used), seed=config.seed + SEED_OFFSET)
    by_level: dict[str, list[dict]] = {lv: [] for lv in LEVELS}
    for t in pool:
        if str(t["answer"]) not in used and t.get("level") in by_level:
            by_level[t["level"]].append({**t, "id": f"confirm-{t['id']}"})
    half = n // 2
    if any(len(v) < half for v in by_level.values()):
        raise ValueError(f"--tasks {n}: at most {2 * min(len(v) for v in by_level.values())} fresh lookups remain "
                         "outside the run's tasks, half per level")
    tasks = [t for pair in zip(*(by_level[lv][:half] for lv in LEVELS)) for t in pair]
    stages.write_jsonl(file, tasks)
    return tasks


def evaluate_models(config: Any, out: Path, models: dict[str, str], tasks: list[dict], samples: int, jobs: int) -> None:
    """Each model greedily (once per task) and sampled (``samples`` per task, the run's temperature), those not
    cached in ``out/eval`` yet, in up to ``jobs`` processes (:func:`websailor.stages.evaluate_models`)."""
    from benchmarks.grpo_dose import MODES, eval_file
    from websailor import stages

    todo = [stages.EvalJob(f"{name}-{mode}", folder, tasks, samples=samples if mode == "sampled" else 1,
                           temperature=temperature, label=f"{name} {mode}")
            for mode, temperature in MODES for name, folder in models.items() if not eval_file(out, name, mode).is_file()]
    stages.evaluate_models(config, out, todo, jobs)


def heuristic_rates(config: Any, out: Path, tasks: list[dict]) -> dict[str, float]:
    """The scripted heuristic's per-task success on ``tasks`` (deterministic: one episode each)."""
    from benchmarks.grpo_dose import task_rates
    from websailor import recipe, stages

    file = out / "eval" / "heuristic.jsonl"
    if not file.is_file():
        stages.evaluate_policy(config, out, "heuristic", "heuristic", tasks,
                               recipe.compact_env_kwargs(config.wiki_dir, max_tool_calls=config.max_tool_calls),
                               kind="heuristic")
    return task_rates(stages.read_jsonl(file))


def compare(rates: dict[str, dict[str, dict[str, float]]], reference: str, levels: dict[str, set[str]]
            ) -> dict[str, Any]:
    """Every other model against ``reference``: greedy - its greedy, sampled - its sampled, sampled - its
    greedy, overall and per level."""
    from benchmarks.grpo_dose import paired

    ref = rates[reference]
    out = {}
    for name, r in rates.items():
        if name == reference:
            continue
        row = {"greedy_vs_greedy": paired(r["greedy"], ref["greedy"]),
               "sampled_vs_sampled": paired(r["sampled"], ref["sampled"]),
               "sampled_vs_greedy": paired(r["sampled"], ref["greedy"]), "per_level": {}}
        for lv, ids in levels.items():
            row["per_level"][lv] = {"greedy_vs_greedy": paired(r["greedy"], ref["greedy"], ids),
                                    "sampled_vs_sampled": paired(r["sampled"], ref["sampled"], ids)}
        out[name] = row
    return out


def draw(summary: dict[str, Any], reference: str, path: Path) -> None:
    """Each model's paired differences from the reference (greedy and sampled) with their intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary["versus"])
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(names) + 1.6))
    for key, label, shift in (("greedy_vs_greedy", "greedy - reference greedy", -0.15),
                              ("sampled_vs_sampled", "sampled - reference sampled", 0.15)):
        d = [summary["versus"][n][key] for n in names]
        ax.errorbar([c["difference"] for c in d], [i + shift for i in range(len(names))],
                    xerr=[[c["difference"] - c["low"] for c in d], [c["high"] - c["difference"] for c in d]],
                    fmt="o", capsize=3, label=label)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set(title=f"paired difference from {reference} on {summary['tasks']} fresh tasks (95% bootstrap)",
           xlabel="success difference")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_table(summary: dict[str, Any], reference: str) -> None:
    from benchmarks.grpo_dose import fmt

    means = summary["means"]
    print(f"\n{summary['tasks']} fresh tasks; reference {reference}: greedy {means[reference]['greedy']:.3f}, "
          f"sampled {means[reference]['sampled']:.3f}; heuristic {summary['heuristic']:.3f}")
    print(f"{'model':<12} {'greedy':>6} {'sampled':>7}  {'greedy - ref greedy':<24} {'sampled - ref sampled':<24} "
          f"{'sampled - ref greedy':<24} verdict (greedy - ref greedy)")
    for name, row in summary["versus"].items():
        print(f"{name:<12} {means[name]['greedy']:>6.3f} {means[name]['sampled']:>7.3f}  "
              f"{fmt(row['greedy_vs_greedy']):<24} {fmt(row['sampled_vs_sampled']):<24} "
              f"{fmt(row['sampled_vs_greedy']):<24} {row['greedy_vs_greedy']['verdict']}")
    print("per level (greedy - ref greedy; sampled - ref sampled):")
    for name, row in summary["versus"].items():
        print(f"{name:<12} " + "; ".join(f"{lv} {fmt(s['greedy_vs_greedy'])}, {fmt(s['sampled_vs_sampled'])}"
                                          for lv, s in row["per_level"].items()))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", default="runs/default", help="the pipeline run the models were trained in (its "
                                                             "settings and tasks; read only)")
    p.add_argument("--out-dir", default="runs/paired_eval", help="where the fresh tasks and the evaluations are written")
    p.add_argument("--model", action="append", default=[], metavar="NAME=FOLDER",
                   help="a saved model (repeat; default: the run's sft and grpo models)")
    p.add_argument("--reference", help="the model the others are paired against (default: the first --model)")
    p.add_argument("--tasks", type=int, default=400, help="fresh held-out lookups (even; half per level)")
    p.add_argument("--exclude", action="append", default=[], metavar="TASKS.jsonl",
                   help="a task file whose pages the fresh tasks must not ask for (e.g. a dose run's extra "
                        "held-out tasks; repeat)")
    p.add_argument("--samples", type=int, default=2, help="sampled episodes per task (plus one greedy)")
    p.add_argument("--jobs", type=int, default=None, help="evaluations at once, each in its own process (default: "
                                                          "the cores up to 4, as many as the free memory holds)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    args = p.parse_args(argv)

    def fail(message: str) -> None:
        print(f"paired_eval: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    from dataclasses import replace

    from benchmarks.grpo_dose import evaluate, mean, recorded_config

    start = time.perf_counter()
    out, run_dir = Path(args.out_dir), Path(args.run_dir)
    try:
        for name in ("tasks", "samples", "jobs"):
            if getattr(args, name) is not None and getattr(args, name) < 1:
                raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
        if args.tasks % 2:
            raise ValueError(f"--tasks must be even (half short descriptions, half first sentences), got {args.tasks}")
        models = parse_models(args.model or [f"{n}={run_dir / n / 'model'}" for n in ("sft", "grpo")])
        reference = args.reference or next(iter(models))
        if reference not in models:
            raise ValueError(f"--reference {reference!r} is not one of the --model names {sorted(models)}")
        for path in args.exclude:
            if not Path(path).is_file():
                raise ValueError(f"--exclude {path}: no such task file")
        config = replace(recorded_config(run_dir, args.device), progress=False)
        (out / "eval").mkdir(parents=True, exist_ok=True)
        check_names(out, models)
        tasks = fresh_lookups(config, run_dir, [Path(x) for x in args.exclude], args.tasks, out)
    except (ValueError, OSError) as exc:
        fail(str(exc).splitlines()[0])
    import torch

    torch.set_num_threads(1)
    from websailor.stages import eval_workers as stages_workers

    jobs = stages_workers(config, args.jobs or 0)
    evaluate_models(config, out, models, tasks, args.samples, jobs)
    rates = {name: evaluate(out, name) for name in models}
    levels = {lv: {str(t["id"]) for t in tasks if t.get("level") == lv} for lv in LEVELS}
    summary: dict[str, Any] = {
        "benchmark": "paired_eval", "tasks": len(tasks), "samples": args.samples, "reference": reference,
        "models": models, "means": {n: {m: mean(r[m]) for m in r} for n, r in rates.items()},
        "heuristic": mean(heuristic_rates(config, out, tasks)), "versus": compare(rates, reference, levels)}
    print_table(summary, reference)
    draw(summary, reference, out / "paired_eval.png")
    summary["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
