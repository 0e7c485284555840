"""GRPO dose-response: held-out success after 0, 4, 8, 16 ... GRPO steps, paired against SFT, per level.

The main job's stages and recipe, reused (:mod:`websailor.stages`, :mod:`websailor.recipe`):

1. A pipeline run directory up to SFT (``--run-dir``; default ``OUT_DIR/run-MODE``, made here by the
   pipeline's own stages simulator, tasks, baselines and sft, recorded in its ``run.json``). A run
   directory given with ``--run-dir`` is only read: its settings (``run.json``) are used.
2. GRPO from the SFT model in segments (:func:`websailor.stages.stage_grpo` in ``OUT_DIR/dose``, which
   links the run's tasks, gold trajectories and SFT model): the trainer resumes from its checkpoint and
   trains on to each dose; each dose's model is saved in ``OUT_DIR/dose/models/step-N``. The probe picks
   the GRPO tasks once, sized for the largest dose.
3. Every dose's model on the same held-out tasks, ``--samples`` samples per task at the pipeline's
   temperature (0.7, top-p 1) and once greedily (:func:`websailor.stages.evaluate_policy`), each paired
   against the SFT model decoded the same way: per-task success (``recipe.task_success``), the 95% paired
   bootstrap interval of the mean difference (``recipe.paired_interval``) and its verdict
   (``recipe.paired_verdict``), overall and per level (lookup-description, lookup-lead, sailorfog).
   ``--sft-first N`` trains the run's SFT model N more SFT steps on its gold trajectories first
   (``OUT_DIR/dose/sft-start``) and starts GRPO and both controls from that model: a start where more SFT
   adds little, so that the ``sft+N`` control below asks what GRPO adds beyond it.
4. Two controls: the SFT model decoded greedily (every dose's sampled success is also paired against
   it), and ``sft+N``: the SFT model trained N more SFT steps on its own gold trajectories, N being the
   optimizer steps GRPO took up to the largest dose (the same number of updates; an SFT step of
   ``--sft-batch`` trajectories costs far less than a GRPO step, which also plays its rollouts).

Prints a table and, last, one JSON line ``{"benchmark": "grpo_dose", ...}``; draws
``OUT_DIR/grpo_dose-MODE.png``. Resumable: run the same command again after an interruption (finished
doses and evaluations are reused).

Sizes. Default (CPU): the main job's sizes (300 title lookups, 14 synthesized tasks, 20 + 20 + 6 held
out, 28 SFT steps of 4), GRPO steps ``0,4,8,16`` of 4 tasks x 4 rollouts, 4 samples per held-out task:
planned to fit in about 2 hours on 2 CPU cores (200 GRPO steps do not: a step takes 1-2 minutes there).
``--device cuda`` uses the GPU sizes instead (:data:`GPU`: 1000 title lookups, 100 + 100 + 20 held out,
120 SFT steps, steps ``0,25,50,100,200`` of 8 tasks x 8 rollouts). ``--smoke``: the tiny config-built
model at the tests' sizes, under a minute (the machinery, no learning).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Iterator

CPU = dict(lookup_tasks=300, synth_tasks=14, heldout=20, synth_heldout=6, sft_steps=28, sft_batch=4,
           grpo_tasks_per_step=4, group_size=4, probe=4)
"""Default sizes on a CPU (the main job's)."""
GPU = dict(lookup_tasks=1000, synth_tasks=60, heldout=100, synth_heldout=20, sft_steps=120, sft_batch=4,
           grpo_tasks_per_step=8, group_size=8, probe=12)
"""Sizes with ``--device cuda``."""
SMOKE = dict(model="tiny", lookup_tasks=12, heldout=2, synth_tasks=4, synth_heldout=1, sft_steps=2, sft_batch=2,
             grpo_tasks_per_step=2, group_size=2, probe=1, max_new_tokens=64)
"""``--smoke``: the tiny model at the tests' sizes."""
STEPS = {"cpu": "0,4,8,16", "cuda": "0,25,50,100,200", "smoke": "0,1,2"}
PREPARE = ("simulator", "tasks", "baselines", "sft")
"""The pipeline stages a fresh run directory gets here (few-shot is not needed)."""
LINKED = ("tasks", "trajectories", "sft")
"""What ``OUT_DIR/dose`` links from the run directory (the stages read them there)."""
GRPO_SETTINGS = ("grpo_lr", "grpo_kl_beta", "grpo_update_epochs", "grpo_tasks_per_step", "group_size")
"""The pipeline settings ``--set`` may change for an existing ``--run-dir``: GRPO's, which act after SFT."""
SETTINGS_FILE = "grpo-settings.json"
"""``OUT_DIR/dose/grpo-settings.json``: the GRPO settings its doses were trained with."""


def parse_steps(text: str) -> list[int]:
    """``"0,25,50"`` as strictly increasing step counts >= 0 (ValueError with a one-line reason)."""
    try:
        steps = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--steps expects comma-separated integers such as 0,25,50, got {text!r}") from None
    if not steps:
        raise ValueError(f"--steps expects at least one step count, got {text!r}")
    if steps[0] < 0:
        raise ValueError(f"--steps must be >= 0, got {steps[0]}")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"--steps must be strictly increasing, got {text!r}")
    return steps


# ----------------------------------------------------------------------------- run directory


def prepare_run(config: Any) -> dict[str, Any]:
    """The pipeline's stages up to SFT in ``config.out`` (:func:`websailor.pipeline.open_run` and its
    stage functions; a finished stage is not redone); returns the run state."""
    from websailor.pipeline import RUN_FILE, STAGE_FUNCTIONS, open_run
    from websailor.stages import write_json

    run_dir, state = open_run(config)
    for name in PREPARE:
        if (state["stages"].get(name) or {}).get("status") == "done":
            continue
        print(f"==> prepare {name}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        result = STAGE_FUNCTIONS[name](config, run_dir)
        state["stages"][name] = {"status": "done", "seconds": round(time.perf_counter() - start, 3), "result": result}
        write_json(run_dir / RUN_FILE, state)
    return state


def recorded_config(run_dir: Path, device: str) -> Any:
    """The settings of an existing run directory (its ``run.json``), which must hold an SFT model."""
    from websailor.pipeline import RUN_FILE, PipelineConfig

    state_file = run_dir / RUN_FILE
    if not state_file.is_file() or not (run_dir / "sft" / "model").is_dir():
        raise ValueError(f"--run-dir {run_dir} holds no pipeline run with an SFT model ({RUN_FILE}, sft/model)")
    recorded = json.loads(state_file.read_text(encoding="utf-8")).get("config") or {}
    known = {f.name for f in fields(PipelineConfig)}
    return PipelineConfig(out=str(run_dir), **{k: v for k, v in recorded.items() if k in known and k != "out"},
                          device=device, resume=True)


def dose_dir(out: Path, run_dir: Path, sft_first: int = 0) -> Path:
    """``OUT_DIR/dose``: the run's tasks, gold trajectories and SFT model linked, GRPO and evaluations its own.
    With ``sft_first``, ``sft`` links ``OUT_DIR/dose/sft-start`` instead: the run's SFT model trained that many
    more SFT steps first (:func:`train_sft_more` into ``sft-start``)."""
    work = out / "dose"
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = work / name
        target = (work / "sft-start" if name == "sft" and sft_first else run_dir / name).resolve()
        if link.is_symlink() and link.resolve() != target:
            raise ValueError(f"{out} holds a dose run whose {name} is {link.resolve()}, not {target} (another "
                             f"--run-dir or --sft-first); use another --out-dir")
        if not link.is_symlink():
            if name == "sft" and sft_first:  # train_sft_more fills it
                target.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target, target_is_directory=True)
    return work


def grpo_settings(config: Any, work: Path) -> dict[str, Any]:
    """The run's GRPO settings, recorded in ``work/grpo-settings.json`` on first use; a dose directory
    trained with other settings is refused (its models would not be those of the settings asked for)."""
    settings = {name: getattr(config, name) for name in GRPO_SETTINGS}
    file = work / SETTINGS_FILE
    if file.is_file():
        try:
            recorded = json.loads(file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ValueError(f"{file} is not the JSON this benchmark writes; use another --out-dir") from None
        if not isinstance(recorded, dict):
            raise ValueError(f"{file} is not the JSON this benchmark writes; use another --out-dir")
        if recorded != settings:
            changed = ", ".join(f"{k} {recorded.get(k)} -> {v}" for k, v in settings.items() if recorded.get(k) != v)
            raise ValueError(f"{work.parent} holds doses trained with other GRPO settings ({changed}); use another "
                             "--out-dir")
    else:  # written whole or not at all: a half-written file would refuse the folder
        from websailor.stages import write_json

        write_json(file, settings)
    return settings


# ----------------------------------------------------------------------------- training


@contextlib.contextmanager
def training_threads(threads: int) -> Iterator[None]:
    """torch's CPU threads set to ``threads`` inside, put back after. Training runs alone in this process, where
    more threads pay: two GRPO steps of the SFT-120 KL recipe took 289 s on one thread and 171 s on two (2 idle
    cores; rollouts 1.5x, updates 1.8x faster, the same rewards), while evaluations, several processes at once,
    decode fastest on one thread each."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_doses(config: Any, work: Path, doses: list[int]) -> dict[int, dict[str, Any]]:
    """GRPO trained on to each dose (resuming its checkpoints); ``{dose: {"model", "updates"}}``, updates being
    the optimizer steps taken up to the dose."""
    from websailor import stages
    from websailor.report import read_jsonl

    selection = work / "grpo" / "selection.json"
    if not selection.is_file() and doses[-1] > 0:  # the probe once, sized for the largest dose
        model, tokenizer = stages._load(work / "sft" / "model")
        stages.write_json(selection, stages._probe(replace(config, grpo_steps=doses[-1]), work, model, tokenizer,
                                                   stages.read_jsonl(work / "tasks" / "train.jsonl")))
    elif selection.is_file():
        extend_pool(config, work, doses[-1])
    out: dict[int, dict[str, Any]] = {}
    for dose in doses:
        target = work / "models" / f"step-{dose}"
        if dose == 0:
            out[0] = {"model": str(work / "sft" / "model"), "updates": 0}
            continue
        if not (target / "config.json").is_file():
            print(f"==> GRPO to step {dose}", file=sys.stderr, flush=True)
            stages.stage_grpo(replace(config, grpo_steps=dose), work)
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(work / "grpo" / "model", target)
        metrics = [m for m in read_jsonl(work / "grpo" / "metrics.jsonl") if (m.get("step") or 0) <= dose]
        # optimizer steps: one per step with signal, or --update-epochs of them (train/optimizer_steps)
        updates = sum(int(m.get("train/optimizer_steps", 1)) for m in metrics
                      if not m.get("train/no_signal") and not m.get("train/skipped"))
        out[dose] = {"model": str(target), "updates": updates}
    return out


def read_selection(work: Path) -> dict[str, Any] | None:
    """The GRPO pool the probe chose (``work/grpo/selection.json``, written whole by :func:`websailor.stages.write_json`),
    or None before the probe; a file that is not that JSON object is a one-line ``ValueError``."""
    file = work / "grpo" / "selection.json"
    if not file.is_file():
        return None
    try:
        selection = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        selection = None
    if not isinstance(selection, dict) or not isinstance(selection.get("tasks"), list):
        raise ValueError(f"{file} is not the GRPO pool this benchmark writes; use another --out-dir")
    return selection


def extend_pool(config: Any, work: Path, largest: int) -> dict[str, Any] | None:
    """A dose run extended past the steps its GRPO pool was chosen for gets fresh tasks for the new steps:
    two per group drawn (as :func:`websailor.stages._probe` sizes it), from the train tasks SFT never saw
    that neither the pool nor the probe took, of the pool's levels and in the probe's weights (a level the
    probe left out stays out; with none of them left, nothing is added and the table names the steps
    that drew from a dry pool). They join the
    pool when GRPO resumes (:meth:`trainers.grpo_data.TaskPool.draw` tops it up). Without them the
    pool runs dry: every task retires and the last ``--grpo-tasks-per-step`` of them are drawn at every
    later step. Returns what was added (None: the pool was large enough)."""
    from collections import Counter

    from websailor import recipe, stages

    file = work / "grpo" / "selection.json"
    selection = read_selection(work) or {}
    tasks = list(selection.get("tasks") or [])
    per_step = 2 * config.grpo_tasks_per_step
    need = largest * per_step - len(tasks)
    if need <= 0:
        return None
    unseen = stages.unseen_train_tasks(config, work, stages.read_jsonl(work / "tasks" / "train.jsonl"))
    rounds = max(1, int(selection.get("probe_rounds") or 1))
    probed = {str(t.get("id")) for level in recipe.LEVELS
              for t in [u for u in unseen if u.get("level") == level][:config.probe * rounds]}
    taken = probed | {str(t.get("id")) for t in tasks}
    levels = {str(t.get("level")) for t in tasks}  # the probe's choice stands: no level joins later
    candidates = [t for t in unseen if str(t.get("id")) not in taken and str(t.get("level")) in levels]
    if not candidates:
        return {"to_steps": largest, "wanted": need, "added": 0, "per_level": {}}
    rates = {str(lv): [float(p)] for lv, p in (selection.get("probe_success") or {}).items()}
    extensions = list(selection.get("extended") or [])
    chosen, _ = recipe.select_grpo_tasks(candidates, rates, need, config.seed + 1 + len(extensions))
    added = {"to_steps": largest, "wanted": need, "added": len(chosen),
             "per_level": dict(Counter(str(t.get("level")) for t in chosen))}
    selection["tasks"] = tasks + chosen
    selection["extended"] = extensions + [added]
    stages.write_json(file, selection)
    print(f"==> GRPO pool: {len(chosen)} fresh tasks added for steps up to {largest} (wanted {need})",
          file=sys.stderr, flush=True)
    return added


def train_sft_more(config: Any, work: Path, steps: int, source: Path | None = None, name: str = "") -> str:
    """The SFT model (``source``, default ``work/sft/model``) trained ``steps`` more SFT steps on its gold
    trajectories (the same layers and rate), saved in ``work/NAME/model`` (default ``sft-more-STEPS``: a dose
    run extended to more GRPO steps trains its longer control apart, never reusing the shorter one)."""
    name = name or f"sft-more-{steps}"
    from trainers.layers import trainable_top
    from trainers.sft import SFTConfig, train
    from websailor import stages

    source = source or work / "sft" / "model"
    target = work / name / "model"
    if (target / "config.json").is_file():
        return str(target)
    what = "SFT control" if name.startswith("sft-more") else "SFT first (the start of GRPO)"
    print(f"==> {what}: {steps} more steps", file=sys.stderr, flush=True)
    model, tokenizer = stages._load(source)
    tiny = config.model == stages.TINY
    trainable_top(model, 0 if tiny else config.train_layers)
    gold = work / "trajectories" / "gold.jsonl"
    n_gold = max(1, len(stages.read_jsonl(gold)))
    sft = SFTConfig(data=[str(gold)], model=str(source), output_dir=str(work / name),
                    lr=3e-3 if tiny else config.sft_lr, batch_size=config.sft_batch, max_steps=steps,
                    epochs=max(1, -(-steps * config.sft_batch // n_gold)), seed=config.seed + 1, max_tokens=2048,
                    min_tool_calls=1, max_turn_tokens=config.max_new_tokens, save_every=10, tensorboard="off",
                    warmup_ratio=0.1, device=stages.model_device(config))
    return str(train(sft, model=model, tokenizer=tokenizer).model_dir or target)


# ----------------------------------------------------------------------------- evaluation


def task_rates(rows: list[dict]) -> dict[str, float]:
    """Per task id, the share of its samples that were correct (rows of repeated listings merged)."""
    from websailor.recipe import task_success

    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        m = merged.setdefault(str(row.get("id")), {"id": row.get("id"), "scored": 0, "correct": 0})
        m["scored"] += int(row.get("scored", row.get("samples", 0)) or 0)
        m["correct"] += int(row.get("correct", 0) or 0)
    return task_success(merged.values())


MODES = (("sampled", None), ("greedy", 0.0))
"""Each model is evaluated sampled (``--samples`` per task, the pipeline's temperature) and greedily (once)."""


def eval_file(work: Path, name: str, mode: str) -> Path:
    """Where one evaluation's per-task rows are cached."""
    return work / "eval" / f"{name}-{mode}.jsonl"


def evaluate_many(config: Any, work: Path, models: list[tuple[str, str, list[dict]]], samples: int,
                  jobs: int) -> None:
    """Every ``(name, model_dir, tasks)`` evaluated sampled and greedily, those not cached yet, in up to ``jobs``
    processes at once (:func:`websailor.stages.evaluate_models`; each decodes on one thread)."""
    from websailor import stages

    todo = [stages.EvalJob(f"{name}-{mode}", model_dir, [t for t in held for _ in range(samples if mode == "sampled"
                                                                                     else 1)],
                           temperature=temperature, label=f"{name} ({mode})")
            for name, model_dir, held in models for mode, temperature in MODES
            if not eval_file(work, name, mode).is_file()]
    stages.evaluate_models(config, work, todo, jobs)


def evaluate(work: Path, name: str) -> dict[str, dict[str, float]]:
    """``{"sampled": {task: rate}, "greedy": {task: rate}}`` of one model, read from its cached evaluations."""
    from websailor import stages

    return {mode: task_rates(stages.read_jsonl(eval_file(work, name, mode))) for mode, _ in MODES}


def extra_heldout(config: Any, work: Path, n: int) -> list[dict[str, Any]]:
    """``n`` more held-out title lookups, descriptions and leads alternating, drawn with another seed than the
    run's and on no page that any of the run's tasks (train, held out, synthesized) asks for; written once to
    ``work/extra-heldout-N.jsonl`` and read from there after."""
    from websailor import recipe, stages

    file = work / f"extra-heldout-{n}.jsonl"
    if file.is_file():
        return stages.read_jsonl(file)
    used = {str(t["answer"]) for t in stages.read_jsonl(work / "tasks" / "all.jsonl")}
    pool = recipe.lookup_tasks(config.wiki_dir, 2 * n + len(used), seed=config.seed + 7_919)
    picked = [{**t, "id": f"extra-{t['id']}"} for t in pool if str(t["answer"]) not in used][:n]
    if len(picked) < n:
        raise ValueError(f"--extra-heldout {n}: only {len(picked)} lookups remain outside the run's tasks")
    stages.write_jsonl(file, picked)
    return picked


def mean(rates: dict[str, float]) -> float | None:
    return round(sum(rates.values()) / len(rates), 4) if rates else None


def paired(a: dict[str, float], b: dict[str, float], ids: set[str] | None = None) -> dict[str, Any]:
    """``a - b`` on the tasks both played (within ``ids``): mean, paired bootstrap 95% interval, verdict."""
    from websailor.recipe import paired_interval, paired_verdict

    if ids is not None:
        a, b = {t: v for t, v in a.items() if t in ids}, {t: v for t, v in b.items() if t in ids}
    diff, lo, hi, n = paired_interval(a, b)
    return {"difference": round(diff, 4), "low": round(lo, 4), "high": round(hi, 4), "tasks": n,
            "verdict": paired_verdict(lo, hi) if n else "no common tasks"}


def dose_row(dose: int, info: dict[str, Any], rates: dict, sft: dict, levels: dict[str, set[str]]) -> dict[str, Any]:
    row = {"steps": dose, "updates": info["updates"], "sampled": mean(rates["sampled"]),
           "greedy": mean(rates["greedy"]), "vs_sft": paired(rates["sampled"], sft["sampled"]),
           "vs_sft_greedy": paired(rates["sampled"], sft["greedy"]),
           "greedy_vs_sft_greedy": paired(rates["greedy"], sft["greedy"]), "per_level": {}}
    for level, ids in levels.items():
        pick = lambda r: {t: v for t, v in r.items() if t in ids}  # noqa: E731
        row["per_level"][level] = {"tasks": len(ids), "sampled": mean(pick(rates["sampled"])),
                                   "greedy": mean(pick(rates["greedy"])),
                                   "vs_sft": paired(rates["sampled"], sft["sampled"], ids),
                                   "greedy_vs_sft_greedy": paired(rates["greedy"], sft["greedy"], ids)}
    return row


# ----------------------------------------------------------------------------- output


def draw(rows: list[dict], controls: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["steps"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4))
    ax = axes[0]
    ax.plot(xs, [r["sampled"] for r in rows], marker="o", label="SFT+GRPO, sampled (all)")
    ax.plot(xs, [r["greedy"] for r in rows], marker="s", label="SFT+GRPO, greedy (all)")
    for level in sorted({lv for r in rows for lv in r["per_level"]}):
        ax.plot(xs, [r["per_level"][level]["sampled"] for r in rows], marker=".", ls="--", alpha=0.7,
                label=f"sampled, {level}")
    for label, value, color in (("SFT greedy", controls.get("sft_greedy"), "tab:gray"),
                                (controls.get("sft_more", {}).get("name", "sft+N") + ", sampled",
                                 controls.get("sft_more", {}).get("sampled"), "tab:brown"),
                                ("heuristic", controls.get("heuristic"), "black")):
        if isinstance(value, (int, float)):
            ax.axhline(value, ls=":", color=color, label=label)
    ax.set(title="held-out success", xlabel="GRPO steps", ylim=(-0.02, 1.02))
    ax.legend(fontsize=7)
    ax = axes[1]
    for key, label, offset in (("vs_sft", "sampled - SFT sampled", -0.15), ("vs_sft_greedy", "sampled - SFT greedy", 0),
                               ("greedy_vs_sft_greedy", "greedy - SFT greedy", 0.15)):
        d = [r[key] for r in rows]
        span = max(1, xs[-1] - xs[0]) * offset / 10
        ax.errorbar([x + span for x in xs], [c["difference"] for c in d],
                    yerr=[[c["difference"] - c["low"] for c in d], [c["high"] - c["difference"] for c in d]],
                    marker="o", capsize=3, label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set(title="paired difference vs SFT (95% bootstrap intervals)", xlabel="GRPO steps")
    ax.legend(fontsize=7)
    for a in axes:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fmt(c: dict[str, Any]) -> str:
    return f"{c['difference']:+.3f} [{c['low']:+.2f}, {c['high']:+.2f}]"


def grpo_pool(work: Path, tasks_per_step: int, largest: int) -> dict[str, Any]:
    """The GRPO task pool (``grpo/selection.json``): its tasks, the steps they cover (two fresh tasks per
    group drawn, :func:`websailor.stages._probe`), what extensions added (:func:`extend_pool`), and a
    ``note`` naming the steps GRPO drew from a dry pool: after every other task retired, only the last
    ``tasks_per_step`` or fewer were left, and each such step drew them again."""
    selection = read_selection(work)
    if selection is None:
        return {}
    tasks = len(selection["tasks"])
    out: dict[str, Any] = {"tasks": tasks, "sized_for_steps": tasks // max(1, 2 * tasks_per_step)}
    if selection.get("extended"):
        out["extended"] = selection["extended"]
    metrics = work / "grpo" / "metrics.jsonl"
    dry = []
    if metrics.is_file():
        from websailor.report import read_jsonl

        rows = {m["step"]: m for m in read_jsonl(metrics) if isinstance(m.get("step"), int) and m["step"] <= largest}
        # a step's active count is after its retirements: the next step draws from it, unless fresh tasks
        # joined first (an extended pool: its fresh count grew)
        dry = sorted(step for step, m in rows.items() if (before := rows.get(step - 1))
                     and isinstance(before.get("data/active_tasks"), int)
                     and before["data/active_tasks"] <= tasks_per_step
                     and m.get("data/fresh_used") == before.get("data/fresh_used"))
    if dry:
        out["dry_steps"] = [dry[0], dry[-1], len(dry)]
        out["note"] = (f"{len(dry)} steps between {dry[0]} and {dry[-1]} drew from a dry pool of at most "
                       f"{tasks_per_step} tasks, the same ones each step")
    return out


def print_table(rows: list[dict], controls: dict[str, Any], pool: dict[str, Any] | None = None) -> None:
    print(f"\n{'steps':>5} {'updates':>7} {'sampled':>7} {'greedy':>6}  {'sampled - SFT':<24} "
          f"{'sampled - SFT greedy':<24} {'greedy - SFT greedy':<24} verdict (sampled - SFT)")
    for r in rows:
        print(f"{r['steps']:>5} {r['updates']:>7} {r['sampled']:>7.3f} {r['greedy']:>6.3f}  {fmt(r['vs_sft']):<24} "
              f"{fmt(r['vs_sft_greedy']):<24} {fmt(r['greedy_vs_sft_greedy']):<24} {r['vs_sft']['verdict']}")
    print("per level (sampled / greedy; sampled - SFT):")
    for r in rows:
        print(f"{r['steps']:>5}  " + "; ".join(
            f"{lv} ({s['tasks']}) {s['sampled']:.3f} / {s['greedy']:.3f}, {fmt(s['vs_sft'])}"
            for lv, s in r["per_level"].items()))
    more = controls.get("sft_more") or {}
    print(f"controls: SFT sampled {controls['sft_sampled']:.3f}, SFT greedy {controls['sft_greedy']:.3f}"
          + (f", heuristic {controls['heuristic']:.3f}" if isinstance(controls.get("heuristic"), float) else "")
          + (f"; {more['name']} ({more['label']}): sampled {more['sampled']:.3f}, greedy {more['greedy']:.3f}, "
             f"largest dose - it {fmt(more['largest_dose_vs'])} ({more['largest_dose_vs']['verdict']})"
             if more.get("sampled") is not None else f"; {more.get('label', 'no SFT control')}"))
    if pool:
        print(f"GRPO pool: {pool['tasks']} tasks, enough for {pool['sized_for_steps']} steps"
              + "".join(f"; {e['added']} fresh added for steps up to {e['to_steps']} (wanted {e['wanted']})"
                        for e in pool.get("extended") or [])
              + (f" ({pool['note']})" if pool.get("note") else ""))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wiki-dir", default="data/wiki")
    p.add_argument("--out-dir", default="runs/grpo_dose")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--run-dir", help="a pipeline run directory with an SFT model to start from (read only; its "
                                     "settings are used); default: OUT_DIR/run-MODE, made here")
    p.add_argument("--steps", help="GRPO step counts, strictly increasing (default 0,4,8,16 on CPU; "
                                    "0,25,50,100,200 with --device cuda; 0,1,2 with --smoke)")
    p.add_argument("--samples", type=int, default=4, help="sampled episodes per held-out task (plus one greedy)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    p.add_argument("--smoke", action="store_true", help="the tiny config-built model at the tests' sizes")
    p.add_argument("--heldout-per-level", type=int, default=0,
                   help="evaluate only the first N held-out tasks of each level (0: all; to size a run down)")
    p.add_argument("--extra-heldout", type=int, default=0, metavar="N",
                   help="evaluate on N more held-out title lookups too (half descriptions, half leads; drawn with "
                        "another seed, none on a page that any of the run's tasks asks for), to separate smaller "
                        "differences; cached apart from the run's held-out evaluations")
    p.add_argument("--control-steps", type=int, default=None,
                   help="SFT steps of the sft+N control (default: GRPO's optimizer steps up to the largest dose)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one pipeline setting of the chosen sizes for a fresh run directory, e.g. "
                        "--set sft_steps=16 (repeatable; benchmarks.learning's --set); with --run-dir only "
                        "GRPO's: " + ", ".join(GRPO_SETTINGS) + " (e.g. --set grpo_kl_beta=0.05)")
    p.add_argument("--sft-first", type=int, default=0, metavar="N",
                   help="train the run's SFT model N more SFT steps on its gold trajectories first and start GRPO "
                        "(and the sft+N control) from that model: a start where more SFT adds little")
    p.add_argument("--jobs", type=int, default=None,
                   help="evaluations run at once, each in its own process on one thread (default: the CPU "
                        "cores, at most 4 and at most what the free memory holds at 6 GB each, on a CPU; 1 on a GPU)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads for GRPO and SFT training, which run alone in this process (default: the "
                        "CPU cores, at most 4; evaluations decode on one thread each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    def fail(message: str) -> None:
        print(f"grpo_dose: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    import torch

    from websailor.pipeline import PipelineConfig

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    mode = "smoke" if args.smoke else "cuda" if cuda else "cpu"
    try:
        doses = parse_steps(args.steps or STEPS[mode])
        if args.jobs is None:
            from websailor.stages import default_eval_workers

            args.jobs = 1 if cuda else default_eval_workers()
        cores = os.cpu_count() or 1
        if args.threads is None:
            args.threads = max(1, min(4, cores))
        for name in ("samples", "jobs", "threads"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
        if args.threads > cores:
            raise ValueError(f"--threads must be at most the {cores} CPU cores (more only wait on each other), "
                             f"got {args.threads}")
        for name in ("heldout_per_level", "control_steps", "extra_heldout", "sft_first"):
            if (getattr(args, name) or 0) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
        from benchmarks.learning import overrides

        changes = overrides(args.set)
        sizes = {"smoke": SMOKE, "cuda": {"model": args.model, **GPU},
                 "cpu": {"model": args.model, **CPU}}[mode] | changes
        if args.run_dir and set(changes) - set(GRPO_SETTINGS):
            raise ValueError(f"--set {', '.join(sorted(set(changes) - set(GRPO_SETTINGS)))} would change the "
                             f"stages of --run-dir {args.run_dir}; with --run-dir, --set takes only "
                             + ", ".join(GRPO_SETTINGS))
    except ValueError as exc:
        fail(str(exc))
    out = Path(args.out_dir)
    start = time.perf_counter()
    torch.set_num_threads(1)  # one thread decodes fastest on a shared 2-core machine (see docs/pipeline.md)
    try:
        if args.run_dir:
            run_dir = Path(args.run_dir)
            config = replace(recorded_config(run_dir, args.device), **changes)
        else:
            run_dir = out / f"run-{mode}"
            config = PipelineConfig(out=str(run_dir), wiki_dir=args.wiki_dir, seed=args.seed, resume=True,
                                    progress=not args.no_progress, device=args.device,
                                    **{**sizes, "grpo_steps": max(1, doses[-1])})
            prepare_run(config)
        config = replace(config, progress=not args.no_progress)
    except (ValueError, OSError) as exc:
        fail(str(exc).splitlines()[0])
    from websailor import recipe, stages

    try:
        work = dose_dir(out, run_dir, args.sft_first)
    except ValueError as exc:
        fail(str(exc))
    try:
        settings = grpo_settings(config, work)
        read_selection(work)  # a damaged pool file is refused here, before any training
    except ValueError as exc:
        fail(str(exc))
    if args.sft_first:
        with training_threads(args.threads):
            train_sft_more(config, work, args.sft_first, source=run_dir / "sft" / "model", name="sft-start")
    held = stages.read_jsonl(work / "tasks" / "heldout.jsonl")
    if args.heldout_per_level:
        held = [t for lv in recipe.LEVELS for t in [t for t in held if t.get("level") == lv][:args.heldout_per_level]]
    try:
        extra = extra_heldout(config, work, args.extra_heldout) if args.extra_heldout else []
    except ValueError as exc:
        fail(str(exc))

    run_held = held  # the run's own held-out tasks (``held`` gains the extra ones below)
    held = held + extra
    levels = {lv: {str(t["id"]) for t in held if t.get("level") == lv} for lv in recipe.LEVELS}
    levels = {lv: ids for lv, ids in levels.items() if ids}
    with training_threads(args.threads):
        trained = train_doses(config, work, doses)
    updates = trained[doses[-1]]["updates"] if args.control_steps is None else args.control_steps
    named = [("step-0", str(work / "sft" / "model"))] + [(f"step-{d}", trained[d]["model"]) for d in doses if d]
    if updates > 0:
        with training_threads(args.threads):
            named.append((f"sft-more-{updates}", train_sft_more(config, work, updates)))
    models = [(name, model_dir, run_held) for name, model_dir in named]
    if extra:  # the extra tasks' evaluations are cached under their own names
        models += [(f"{name}-extra{len(extra)}", model_dir, extra) for name, model_dir in named]
    evaluate_many(config, work, models, args.samples, args.jobs)

    def evaluate_all(name: str) -> dict[str, dict[str, float]]:
        rates = evaluate(work, name)
        if extra:
            more = evaluate(work, f"{name}-extra{len(extra)}")
            rates = {m: {**rates[m], **more[m]} for m in rates}
        return rates

    sft = evaluate_all("step-0")
    rows, rates = [], {}
    for dose in doses:
        rates[dose] = sft if dose == 0 else evaluate_all(f"step-{dose}")
        rows.append(dose_row(dose, trained[dose], rates[dose], sft, levels))
    controls: dict[str, Any] = {"sft_sampled": mean(sft["sampled"]), "sft_greedy": mean(sft["greedy"])}
    heuristic = (stages.read_jsonl(run_dir / "eval" / "heuristic.jsonl")
                 if (run_dir / "eval" / "heuristic.jsonl").is_file() else [])
    if heuristic and extra:  # the scripted heuristic on the extra tasks too, so that it covers the same tasks
        file = work / "eval" / f"heuristic-extra{len(extra)}.jsonl"
        if not file.is_file():
            stages.evaluate_policy(config, work, f"heuristic-extra{len(extra)}", "heuristic", extra,
                                   recipe.compact_env_kwargs(config.wiki_dir, max_tool_calls=config.max_tool_calls),
                                   kind="heuristic")
        heuristic += stages.read_jsonl(file)
    controls["heuristic"] = mean(task_rates(heuristic)) if heuristic else None
    name = f"sft+{updates}"
    label = (f"the SFT model trained {updates} more SFT steps of {config.sft_batch} gold trajectories: "
             + (f"as many optimizer steps as GRPO took to step {doses[-1]}, far fewer episodes"
                if args.control_steps is None else f"set by --control-steps; GRPO took "
                f"{trained[doses[-1]]['updates']} optimizer steps to step {doses[-1]}"))
    if updates > 0:
        more = evaluate_all(f"sft-more-{updates}")
        controls["sft_more"] = {"name": name, "label": label, "steps": updates, "sampled": mean(more["sampled"]),
                                "greedy": mean(more["greedy"]), "vs_sft": paired(more["sampled"], sft["sampled"]),
                                "largest_dose_vs": paired(rates[doses[-1]]["sampled"], more["sampled"])}
    else:
        why = ("--control-steps 0" if args.control_steps is not None
               else "GRPO took no optimizer step; --control-steps sets one")
        controls["sft_more"] = {"name": name, "label": f"no SFT control ({why})", "steps": 0}
    figure = out / f"grpo_dose-{mode}.png"
    draw(rows, controls, figure)
    pool = grpo_pool(work, config.grpo_tasks_per_step, doses[-1])
    print_table(rows, controls, pool)
    result = {"benchmark": "grpo_dose", "mode": mode, "model": config.model, "device": stages.model_device(config),
              "run_dir": str(run_dir), "samples": args.samples, "temperature": config.temperature, "top_p": config.top_p,
              "sft_first": args.sft_first, "heldout_tasks": len(held), "extra_heldout": len(extra), "heldout_per_level": {lv: len(ids) for lv, ids in levels.items()},
              "grpo": {"tasks_per_step": config.grpo_tasks_per_step, "group_size": config.group_size,
                       "lr": config.grpo_lr, "update_epochs": config.grpo_update_epochs,
                       "kl_beta": settings["grpo_kl_beta"], "train_layers": config.train_layers, "pool": pool},
              "doses": rows, "controls": controls, "figure": str(figure),
              "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
