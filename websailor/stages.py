"""The stages of ``websailor pipeline`` (:mod:`websailor.pipeline` runs them in order; each reads
the files the one before wrote into the run directory). The recipe they follow (task levels,
compact observations, gold turns, GRPO task selection) is :mod:`websailor.recipe`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from websailor import recipe
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import read_jsonl, write_json_atomic, write_jsonl_atomic

TINY = "tiny"
"""``--model tiny``: a 2-layer model built from a config with a locally trained subword tokenizer
(tests; shows the machinery, learns little)."""
SCHEDULE = "lockstep"
"""How every model stage batches its episodes (probe, GRPO rollouts, evaluation): one generation once every
running episode waits for the model, so the batches, hence the samples, are the same on every run. With
``async`` (generate for whichever half is ready first) a batch's padding varied with tool-call timing; its
float noise flipped near-tied tokens (two GRPO runs from the same SFT model parted at step 4), and the
main job's ``grpo - sft`` came out +0.065, +0.130 and +0.141 on three runs of the same code."""
EPISODE_TOKENS = 4096
"""Prompt plus trajectory tokens an episode may hold in every model stage, and the tokens of one GRPO update pass
(a group of ``--group-size`` episodes; the main job's are under 1,000 tokens each). Fixed, not sized from the
free memory, so that the passes, hence the gradients' last bits, are the same on every machine."""
EVAL_BATCH = 128
"""Episodes an evaluation plays at once (one lockstep batch at most this wide), so that its memory is bounded:
800 at once held 6 GB. Each episode samples from its own seed; a different width changes only what float
noise in the batched forward passes does to near-tied tokens. The main job's evaluations (92 episodes) fit."""


def write_json(path: Path, value: Any) -> None:
    """``value`` as JSON in ``path`` (atomically), its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, value, indent=2, ensure_ascii=False, default=str)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` for the block (POSIX ``flock``; no lock where there is none)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: callers run one process at a time there
        yield
        return
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_jsonl(path: Path, records: list[dict]) -> None:
    """``records`` as JSONL in ``path`` (atomically), its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(path, records, ensure_ascii=False, default=str)


# ----------------------------------------------------------------------------- simulator and tasks


def stage_simulator(config: Any, run_dir: Path) -> dict[str, Any]:
    """Reuse the simulator in --wiki-dir if it opens; build the default one if there is none, or if
    the one there is a default build of an older format. Any other simulator is the user's: say so."""
    from wiki_sim import WikiSim
    from wiki_sim.build import build
    from wiki_sim.errors import WikiSimError
    from wiki_sim.sim import read_build_info

    wiki = Path(config.wiki_dir)
    try:
        with WikiSim(wiki) as sim:
            return {"wiki_dir": str(wiki), "built": False, "pages": sim.stats().get("pages")}
    except WikiSimError as exc:
        if (wiki / "build.json").is_file():
            kind = ((read_build_info(wiki).get("source") or {}).get("kind"))
            if kind != "default":
                raise UserError(f"{exc} (the pipeline rebuilds only the embedded default by itself)") from None
    info = build("default", None, wiki, workers=2, progress=config.progress)
    return {"wiki_dir": str(wiki), "built": True, "pages": (info.get("counts") or {}).get("pages")}


def stage_tasks(config: Any, run_dir: Path) -> dict[str, Any]:
    """Derived title lookups plus synthesized SailorFog-QA-V2 tasks, each with its ``level``; held-out
    tasks drawn per level by the seed; the synthesis oracle's trajectories of the train split kept."""
    tasks_dir = run_dir / "tasks"
    records = recipe.lookup_tasks(config.wiki_dir, config.lookup_tasks, config.seed)
    if getattr(config, "hop_tasks", 0):
        records += recipe.hop_tasks(config.wiki_dir, config.hop_tasks, config.seed)
    synth_summary: dict[str, Any] = {}
    if config.synth_tasks:
        from sailorfog.cli import SynthConfig, run_synth

        synth_file = tasks_dir / "synth.jsonl"
        synth_file.parent.mkdir(parents=True, exist_ok=True)
        summary = run_synth(SynthConfig(wiki=config.wiki_dir, out=str(synth_file), n=config.synth_tasks,
                                        seed=config.seed, progress=config.progress))
        synth_summary = {k: v for k, v in summary.items() if isinstance(v, (int, float, str))}
        records += [{**r, "level": "sailorfog"} for r in read_jsonl(synth_file)]
    held_per_level = {"lookup-description": config.heldout, "lookup-lead": config.heldout,
                      "lookup-hop": getattr(config, "hop_heldout", 0), "sailorfog": config.synth_heldout}
    train, held = recipe.split_by_level(records, held_per_level, config.seed)
    if not train or not held:
        raise UserError(f"{len(records)} task(s) give no train/held-out split; raise --lookup-tasks")
    write_jsonl(tasks_dir / "all.jsonl", records)
    write_jsonl(tasks_dir / "train.jsonl", train)
    write_jsonl(tasks_dir / "heldout.jsonl", held)
    oracle = [r["oracle"] for r in train if isinstance(r.get("oracle"), dict)]
    write_jsonl(run_dir / "trajectories" / "oracle.jsonl", oracle)
    count = lambda rs: {lv: n for lv in recipe.LEVELS if (n := sum(r.get("level") == lv for r in rs))}  # noqa: E731
    return {"tasks": len(records), "train": len(train), "heldout": len(held), "train_per_level": count(train),
            "heldout_per_level": count(held), "oracle_trajectories": len(oracle), "synth": synth_summary}


# ----------------------------------------------------------------------------- evaluation


def model_device(config: Any) -> str:
    """``--device`` resolved: ``cuda`` or ``cpu`` (auto is cuda when a GPU is visible)."""
    import torch

    device = getattr(config, "device", "cpu")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def model_label(config: Any) -> str:
    return "tiny (2-layer Qwen2 built from a config)" if config.model == TINY else config.model


def evaluate_policy(config: Any, run_dir: Path, name: str, policy: Any, tasks: list[dict],
                    kwargs: dict[str, Any], *, kind: str, model: str = "",
                    temperature: float | None = None, samples: int = 1) -> dict[str, Any]:
    """Play ``policy`` (a baseline name or a policy backend) ``samples`` times on each of ``tasks``, at
    ``temperature`` (default ``--temperature``; 0 is greedy); write ``eval/NAME.jsonl`` (one row per task,
    its samples counted), ``eval/NAME.trajectories.jsonl`` and merge ``eval/summary.json``."""
    temperature = config.temperature if temperature is None else temperature
    from trainers.eval import EvalConfig, check_errors, per_task_rows, play_baseline, summarize
    from trainers.rollout import RolloutConfig, collect

    eval_dir = run_dir / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    record = EvalConfig(tasks=str(run_dir / "tasks" / "heldout.jsonl"), policy=kind, model=model or "-",
                        name=name, out=str(eval_dir), wiki_dir=config.wiki_dir,
                        max_tool_calls=config.max_tool_calls, seed=config.seed, temperature=temperature,
                        top_p=config.top_p, max_new_tokens=config.max_new_tokens, k=samples)
    rollout = RolloutConfig(env_id="websailor/WikiSim-v0", env_kwargs={"tasks": tasks, **kwargs},
                            max_new_tokens=config.max_new_tokens, temperature=temperature, top_p=config.top_p,
                            num_envs=min(len(tasks) * samples, EVAL_BATCH), tool_workers=2, max_total_tokens=EPISODE_TOKENS,
                            max_episode_seconds=900.0, policy_name=name, seed=config.seed, schedule=SCHEDULE)
    start = time.perf_counter()
    if isinstance(policy, str):
        trajectories = play_baseline(policy, tasks, rollout, samples)
    else:
        trajectories = collect(policy, tasks, rollout, group_size=samples, progress=config.progress)
    rows = per_task_rows(trajectories, samples)
    summary = summarize(rows, trajectories, record, time.perf_counter() - start)
    summary.update(recipe.policy_stats(trajectories, {}), tasks_split="heldout", model=model or "-")
    write_jsonl(eval_dir / f"{name}.jsonl", rows)
    write_jsonl(eval_dir / f"{name}.trajectories.jsonl", [t.to_record() for t in trajectories])
    path = eval_dir / "summary.json"
    with _locked(eval_dir / ".summary.lock"):  # evaluations in parallel processes merge one at a time
        merged = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        merged[name] = summary
        write_json(path, merged)
    check_errors(summary, str(eval_dir))  # judge/policy/env errors dominating: the stage fails, files kept
    return {k: summary[k] for k in ("success", "success_ci95", "well_formed_turns", "mean_tool_calls",
                                    "terminations", "errors", "error_share") if k in summary}


def stage_baselines(config: Any, run_dir: Path) -> dict[str, Any]:
    held = read_jsonl(run_dir / "tasks" / "heldout.jsonl")
    kwargs = recipe.compact_env_kwargs(config.wiki_dir, max_tool_calls=config.max_tool_calls)
    return {name: evaluate_policy(config, run_dir, name, name, held, kwargs, kind=name)
            for name in ("random", "heuristic")}


def _load(model_dir: str | Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    from trainers.models import load_tokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    return model, load_tokenizer(model_dir)


def base_model_dir(config: Any, run_dir: Path) -> str:
    """The starting model's folder: the pretrained model ``--model`` names, or a tiny model built here."""
    if config.model != TINY:
        from trainers.models import resolve_model

        return resolve_model(config.model)
    import itertools

    from trainers.subword import train_subword_tokenizer, transcript_corpus, wiki_corpus
    from trainers.tiny_lm import save_tiny_lm

    path = run_dir / "model" / "init"
    if not (path / "config.json").is_file():
        gold = recipe.gold_trajectories(config.wiki_dir, read_jsonl(run_dir / "tasks" / "train.jsonl"), 200)
        tokenizer = train_subword_tokenizer(itertools.chain(wiki_corpus(config.wiki_dir),
                                                            transcript_corpus(gold, repeat=10)), vocab_size=2048)
        save_tiny_lm(path, layers=2, hidden=128, heads=4, seed=config.seed, max_positions=8192, tokenizer=tokenizer)
    return str(path)


def stage_fewshot(config: Any, run_dir: Path) -> dict[str, Any]:
    """The pretrained model before any training, with one worked example in its system prompt."""
    from trainers.policies import TransformersPolicy

    held = read_jsonl(run_dir / "tasks" / "heldout.jsonl")
    source = base_model_dir(config, run_dir)
    model, tokenizer = _load(source)
    kwargs = recipe.compact_env_kwargs(config.wiki_dir, fewshot=True, max_tool_calls=config.max_tool_calls)
    policy = TransformersPolicy(model.eval(), tokenizer, device=model_device(config))
    return {"fewshot": evaluate_policy(config, run_dir, "fewshot", policy,
                                       held, kwargs, kind="transformers", model=model_label(config))}


# ----------------------------------------------------------------------------- training


def stage_sft(config: Any, run_dir: Path) -> dict[str, Any]:
    """SFT on gold title-lookup trajectories (:func:`websailor.recipe.gold_trajectories`), the top
    ``--train-layers`` layers only (:func:`trainers.layers.trainable_top`)."""
    from trainers.layers import trainable_top
    from trainers.sft import SFTConfig, train

    gold_file = run_dir / "trajectories" / "gold.jsonl"
    if not gold_file.is_file():
        train_tasks = read_jsonl(run_dir / "tasks" / "train.jsonl")
        write_jsonl(gold_file, recipe.gold_trajectories(config.wiki_dir, train_tasks,
                                                        config.sft_steps * config.sft_batch))
    gold = read_jsonl(gold_file)
    if not gold:
        raise UserError("no gold trajectory: the train split holds no title lookup the gold agent solves; "
                         "raise --lookup-tasks")
    source = base_model_dir(config, run_dir)
    model, tokenizer = _load(source)
    tiny = config.model == TINY
    sizes = trainable_top(model, 0 if tiny else config.train_layers)
    sft = SFTConfig(data=[str(gold_file)], model=source, output_dir=str(run_dir / "sft"),
                    lr=3e-3 if tiny else config.sft_lr, batch_size=config.sft_batch, max_steps=config.sft_steps,
                    epochs=max(1, math.ceil(config.sft_steps * config.sft_batch / len(gold))), seed=config.seed,
                    max_tokens=2048, min_tool_calls=1, max_turn_tokens=config.max_new_tokens, save_every=10, tensorboard="off", warmup_ratio=0.1,
                    device=model_device(config))
    bar = None
    if config.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=config.sft_steps, desc="sft", unit="step")

    def on_step(metrics: dict[str, Any]) -> None:
        if bar is not None and isinstance(metrics.get("step"), int):
            bar.update(metrics["step"] - bar.n)
            if isinstance(metrics.get("loss/sft"), (int, float)):
                bar.set_postfix(loss=f"{metrics['loss/sft']:.3f}", refresh=False)

    try:
        result = train(sft, model=model, tokenizer=tokenizer, on_step=on_step)
    finally:
        if bar is not None:
            bar.close()
    return {"steps": result.steps, "final_loss": result.final_loss, "gold_trajectories": len(gold),
            "filters": result.filter_report, "model_dir": result.model_dir, **sizes}


def sft_task_ids(run_dir: Path) -> set[str]:
    """The ids of the tasks whose gold trajectories SFT trained on."""
    gold_file = run_dir / "trajectories" / "gold.jsonl"
    if not gold_file.is_file():
        return set()
    return {str((r.get("task") or {}).get("id", r.get("id"))) for r in read_jsonl(gold_file)}


def unseen_train_tasks(config: Any, run_dir: Path, train_tasks: list[dict]) -> list[dict]:
    """The train tasks SFT never saw a trajectory of: what the probe and GRPO may draw from. Too few
    of them (every GRPO step needs its tasks) is an error that says what to raise."""
    seen = sft_task_ids(run_dir)
    unseen = [t for t in train_tasks if str(t.get("id")) not in seen]
    need = config.grpo_tasks_per_step + config.probe
    if len(unseen) < need:
        raise UserError(f"only {len(unseen)} train task(s) are not in SFT's gold set ({len(seen)} are), but the probe "
                        f"and one GRPO step need {need}: raise --lookup-tasks or lower --sft-steps/--sft-batch")
    return unseen


PROBE_ROUNDS = 3
"""Rounds of ``--probe`` episodes per level the probe plays at most, until some level shows a success."""


def _probe(config: Any, run_dir: Path, model: Any, tokenizer: Any, train_tasks: list[dict]) -> dict[str, Any]:
    """The SFT model's outcomes on ``--probe`` train tasks per level, and the GRPO tasks they pick;
    both drawn from the tasks SFT never saw (:func:`unseen_train_tasks`). Where a round sees no success
    on any level, another round probes fresh tasks (up to :data:`PROBE_ROUNDS`).

    The probe takes each level's first unseen tasks in the train file's order, which are the tasks whose
    gold trajectory failed (the gold set took the ones before them): it under-reads a level, and the main
    job's description lookups read 0, so GRPO trains on lead lookups. Drawn at random instead (e2389d2),
    the pool held both levels and the main job's GRPO fell below SFT (-0.141 [-0.261, -0.022] on its 46
    held-out tasks, turns less often well formed); from a saturated SFT model it made no difference
    (benchmarks/README.md#grpo_dose). The order stays until a pool of both levels is shown to help."""
    from trainers.policies import TransformersPolicy
    from trainers.rollout import RolloutConfig, collect

    unseen = unseen_train_tasks(config, run_dir, train_tasks)
    kwargs = recipe.compact_env_kwargs(config.wiki_dir, max_tool_calls=config.max_tool_calls)
    model.eval()
    policy = TransformersPolicy(model, tokenizer, device=model_device(config))
    outcomes: dict[str, list[float]] = {}
    probed: set[Any] = set()
    rounds = 0
    while rounds < PROBE_ROUNDS and not any(sum(o) for o in outcomes.values()):
        probe = []
        for level in recipe.LEVELS:
            probe += [t for t in unseen if t.get("level") == level and t.get("id") not in probed][:config.probe]
        if not probe:
            break
        rounds += 1
        probed |= {t.get("id") for t in probe}
        rollout = RolloutConfig(env_id="websailor/WikiSim-v0", env_kwargs={"tasks": probe, **kwargs},
                                max_new_tokens=config.max_new_tokens, temperature=config.temperature, top_p=1.0,
                                num_envs=max(1, len(probe)), tool_workers=2, max_total_tokens=EPISODE_TOKENS,
                                policy_name="sft-probe", seed=config.seed + rounds, schedule=SCHEDULE)
        for t in collect(policy, probe, rollout, progress=config.progress):
            outcomes.setdefault(str(t.task.get("level")), []).append(float(bool(t.is_correct)))
    candidates = [t for t in unseen if t.get("id") not in probed] or unseen
    n = config.grpo_steps * config.grpo_tasks_per_step * 2
    try:
        chosen, why = recipe.select_grpo_tasks(candidates, outcomes, n, config.seed,
                                               recipe.parse_level_shares(getattr(config, "grpo_levels", "")))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return {"tasks": chosen, "sft_tasks_excluded": len(train_tasks) - len(unseen), "probe_rounds": rounds, **why}


def stage_grpo(config: Any, run_dir: Path) -> dict[str, Any]:
    """GRPO from the SFT model on train tasks of useful difficulty (probe first)."""
    import torch

    from trainers.grpo import GRPOConfig, GRPOTrainer
    from trainers.layers import trainable_top

    model_dir = run_dir / "sft" / "model"
    model, tokenizer = _load(model_dir)
    selection_file = run_dir / "grpo" / "selection.json"
    if not selection_file.is_file():  # the probe is decided once; a resumed run trains on the same tasks
        write_json(selection_file, _probe(config, run_dir, model, tokenizer,
                                          read_jsonl(run_dir / "tasks" / "train.jsonl")))
    selection = json.loads(selection_file.read_text(encoding="utf-8"))
    tasks = selection["tasks"]
    tiny = config.model == TINY
    sizes = trainable_top(model, 0 if tiny else config.train_layers)
    before = {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}
    tasks_file = run_dir / "grpo" / "tasks.jsonl"
    write_jsonl(tasks_file, tasks)
    per_step = max(1, min(config.grpo_tasks_per_step, len(tasks)))
    grpo = GRPOConfig(model=str(model_dir), tasks=str(tasks_file), output_dir=str(run_dir / "grpo"),
                      steps=config.grpo_steps, batch_size=per_step * config.group_size, group_size=config.group_size,
                      micro_batch_size=config.group_size, learning_rate=1e-4 if tiny else config.grpo_lr,
                      max_new_tokens=config.max_new_tokens, max_tool_calls=config.max_tool_calls,
                      temperature=config.temperature, top_p=1.0, dynamic_sampling_rounds=2,
                      update_epochs=config.grpo_update_epochs, kl_beta=config.grpo_kl_beta,
                      pool_size=max(per_step, len(tasks)), retire_window=1, equal_groups="drop", save_every=1,
                      lockstep_rollouts=SCHEDULE == "lockstep", max_total_tokens=EPISODE_TOKENS,
                      micro_batch_tokens=EPISODE_TOKENS,
                      overlong="penalize",
                      seed=config.seed, device=model_device(config), tensorboard="off", progress=config.progress,
                      resume=True)
    trainer = GRPOTrainer(grpo, model, tokenizer, tasks,
                          env_kwargs={"tasks": tasks, **recipe.compact_env_kwargs(
                              config.wiki_dir, max_tool_calls=config.max_tool_calls)})
    try:
        trainer.train()
    finally:
        trainer.dist.destroy()
    with torch.no_grad():
        change = max((float((p - before[k]).abs().max()) for k, p in model.named_parameters() if k in before),
                     default=0.0)
    metrics = read_jsonl(run_dir / "grpo" / "metrics.jsonl") if (run_dir / "grpo" / "metrics.jsonl").is_file() else []
    signal = [m for m in metrics if not m.get("train/no_signal") and not m.get("train/skipped")]
    return {"steps": trainer.step, "signal_steps": len(signal), "no_signal_steps": len(metrics) - len(signal),
            "max_weight_change": change, "probe_success": selection.get("probe_success"),
            "chosen_per_level": selection.get("chosen_per_level"), "probe_fallback": selection.get("fallback"),
            "probe_rounds": selection.get("probe_rounds"), "pool_tasks": len(tasks), "groups_drawn": sum(int(m.get("groups/groups", 0) or 0) for m in metrics),
            "mean_reward": [m.get("reward/mean") for m in metrics], **sizes}


@dataclass(frozen=True)
class EvalJob:
    """One evaluation of a saved model (:func:`evaluate_models`)."""

    name: str
    """Its name: the files ``eval/NAME.jsonl`` and ``eval/NAME.trajectories.jsonl``, its key in the summary."""
    model_dir: str
    """The saved model (a folder :func:`_load` reads)."""
    tasks: list[dict] = field(default_factory=list)
    """The tasks it plays."""
    samples: int = 1
    """Episodes per task."""
    temperature: float | None = None
    """Sampling temperature (None: ``--temperature``; 0: greedy)."""
    label: str = ""
    """The model's label in the summary."""


EVAL_WORKER_BYTES = 6 << 30
"""Memory one CPU evaluation of SmolLM2-135M may reach (:data:`EVAL_BATCH` episodes at once: 5.6 GB of
anonymous memory measured); the default number of evaluations at once leaves each this much."""


def default_eval_workers() -> int:
    """Evaluations a CPU runs at once by default: its cores up to 4, and no more than the available memory
    holds at :data:`EVAL_WORKER_BYTES` each (four at once on a 24 GB machine with other work on it were
    killed for memory), at least one."""
    from trainers.memory import available_memory

    free, _ = available_memory("cpu")
    by_memory = free // EVAL_WORKER_BYTES if free else 4
    return max(1, min(4, os.cpu_count() or 1, by_memory))


def eval_workers(config: Any, asked: int = 0) -> int:
    """Evaluations run at once: ``asked`` (or ``--workers``) where set, else :func:`default_eval_workers`;
    one on a GPU, where one process already uses the device."""
    if model_device(config) != "cpu":
        return 1
    return asked or getattr(config, "workers", 0) or default_eval_workers()


def _run_eval_job(config: Any, run_dir: Path, job: EvalJob) -> dict[str, Any]:
    """:func:`evaluate_policy` of one saved model (in a worker process of :func:`evaluate_models` or here)."""
    import torch

    from trainers.policies import TransformersPolicy

    torch.set_num_threads(getattr(config, "threads", 0) or 1)
    model, tokenizer = _load(job.model_dir)
    policy = TransformersPolicy(model.eval(), tokenizer, device=model_device(config))
    kwargs = recipe.compact_env_kwargs(config.wiki_dir, max_tool_calls=config.max_tool_calls)
    return evaluate_policy(config, run_dir, job.name, policy, job.tasks, kwargs, kind="transformers",
                           model=job.label or job.name, temperature=job.temperature, samples=job.samples)


def eval_pool(workers: int) -> Any:
    """The processes of :func:`evaluate_models`: spawned (no copy of this process's torch state), each
    ending itself when this process dies (:func:`wiki_sim.common.orphans.exit_with_parent`), so a killed
    pipeline leaves no evaluation running on that writes into its run folder."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from wiki_sim.common.orphans import exit_with_parent

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(),))


def evaluate_models(config: Any, run_dir: Path, jobs: list[EvalJob], workers: int = 1) -> dict[str, dict[str, Any]]:
    """Every job's :func:`evaluate_policy` result by name; with ``workers`` > 1, up to that many at once, each
    in a process of its own (episodes are seeded per evaluation, so the results equal those of one process;
    progress bars are left out there). The longest jobs start first."""
    if workers <= 1 or len(jobs) <= 1:
        return {job.name: _run_eval_job(config, run_dir, job) for job in jobs}
    quiet = replace(config, progress=False)
    order = sorted(jobs, key=lambda j: -len(j.tasks) * j.samples)
    print(f"{len(jobs)} evaluations in {min(workers, len(jobs))} processes: "
          + ", ".join(j.name for j in order), flush=True)
    with eval_pool(min(workers, len(jobs))) as pool:
        futures = {job.name: pool.submit(_run_eval_job, quiet, run_dir, job) for job in order}
        out = {job.name: futures[job.name].result() for job in jobs}
    path = run_dir / "eval" / "summary.json"
    with _locked(run_dir / "eval" / ".summary.lock"):  # the jobs' order, not the order they finished in
        merged = json.loads(path.read_text(encoding="utf-8"))
        names = [job.name for job in jobs]
        write_json(path, {**{k: v for k, v in merged.items() if k not in names},
                          **{k: merged[k] for k in names if k in merged}})
    return out


def stage_eval(config: Any, run_dir: Path) -> dict[str, Any]:
    held = read_jsonl(run_dir / "tasks" / "heldout.jsonl")
    jobs = []
    for name in ("sft", "grpo"):
        model_dir = run_dir / name / "model"
        if not model_dir.is_dir():
            continue
        label = f"{model_label(config)} + {name}"
        jobs.append(EvalJob(name, str(model_dir), held, samples=config.eval_samples, label=label))
        # The right control for a sampled gain: the same model decoded greedily.
        jobs.append(EvalJob(f"{name}-greedy", str(model_dir), held, temperature=0.0, label=f"{label} (greedy)"))
    out = evaluate_models(config, run_dir, jobs, eval_workers(config))
    if config.endpoint:
        from trainers.policies import OpenAIPolicy

        policy = OpenAIPolicy(config.endpoint, config.endpoint_model, api_key=os.environ.get("OPENAI_API_KEY"))
        out["endpoint"] = evaluate_policy(config, run_dir, "endpoint", policy, held, {"wiki_dir": config.wiki_dir},
                                          kind="openai", model=config.endpoint_model)
    return out


def stage_report(config: Any, run_dir: Path) -> dict[str, Any]:
    from websailor.report import build_report

    return {"report": str(build_report(run_dir))}


STAGE_FUNCTIONS = {"simulator": stage_simulator, "tasks": stage_tasks, "baselines": stage_baselines,
                   "fewshot": stage_fewshot, "sft": stage_sft, "grpo": stage_grpo, "eval": stage_eval,
                   "report": stage_report}
