"""``websailor pipeline --out runs/NAME``: the whole system, end to end, on the embedded default.

Stages (:mod:`websailor.stages`), each reading the files the one before wrote into the run
directory:

1. ``simulator``: build (or reuse) the offline Wikipedia simulator;
2. ``tasks``: derived title lookups and synthesized SailorFog-QA-V2 tasks, each with its
   level, split into ``tasks/train.jsonl`` and ``tasks/heldout.jsonl`` per level by seed;
3. ``baselines``: the random and scripted heuristic policies on the held-out split;
4. ``fewshot``: the pretrained model (SmolLM2-135M-Instruct by default) with one worked example
   in its prompt, on the held-out split;
5. ``sft``: SFT on gold title-lookup trajectories (the top ``--train-layers`` layers);
6. ``grpo``: a probe of the SFT model picks train tasks of useful difficulty, then GRPO;
7. ``eval``: the SFT and GRPO models on the held-out split (or ``--endpoint``, a vLLM or other
   OpenAI-compatible server, evaluated as a text policy);
8. ``report``: ``report.html`` (:mod:`websailor.report`).

Every policy plays the compact environment of :mod:`websailor.recipe` (short prompt, top-3
search hits with short snippets, short visits) so that a 135M model on two CPU cores decodes
and trains in minutes. ``run.json`` records the configuration and each finished stage, so an
interrupted run resumes from its last finished stage (SFT and GRPO also from their own
checkpoints). A finished run is not touched again unless ``--resume`` (re-run nothing that is
done; rebuild the report) or ``--overwrite`` (start over; only a folder that holds this
project's run record and nothing else).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import KW_ONLY, MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Literal

from trainers.rollout_options import EpisodeOptions
from websailor import recipe
from websailor.stages import STAGE_FUNCTIONS, model_device, write_json
from wiki_sim.common.errors import UserError

STAGES = ("simulator", "tasks", "baselines", "fewshot", "sft", "grpo", "eval", "report")
RUN_FILE = "run.json"
RUN_KIND = "websailor-gym/pipeline-run"
"""``run.json``'s ``kind``: what ``--overwrite`` checks before it deletes anything."""
RUN_ENTRIES = frozenset({RUN_FILE, RUN_FILE + ".tmp", "report.html", "report.html.tmp", "tasks", "trajectories",
                         "eval", "sft", "grpo", "model"})
"""What a run directory may hold; ``--overwrite`` refuses a folder with anything else in it."""


@dataclass
class PipelineConfig(EpisodeOptions):
    """Run the whole system on the embedded default: simulator, tasks, baselines, the few-shot
    pretrained model, SFT, GRPO, evaluation and report.html, all under --out. --temperature and
    --top-p sample the evaluation episodes, the probe and GRPO alike (GRPO trains where the policy is
    evaluated; it needs --top-p 1), and the trained models are evaluated greedily too; --max-new-tokens
    and --max-tool-calls hold for every episode (:mod:`trainers.rollout_options`). Temperature 0.7: this
    job's SFT model solved the held-out lookups 0.09 at 1.0, 0.35 at 0.7 (top-p 0.95) and 0.50 greedy
    (measured on 2a2045e), and at 1.0 most GRPO groups carried no signal."""

    out: str = field(metadata={"flag": "--out"})
    """The run directory (created; refused if it holds a finished run, unless --resume or --overwrite)."""
    _: KW_ONLY
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 64
    max_tool_calls: int = 2
    wiki_dir: str = "data/wiki"
    """The simulator directory (built from the embedded default corpus if missing)."""
    model: str = "smollm2-135m"
    """The pretrained model: a short name (smollm2-135m, set up by setup_wiki.sh), a local folder, or
    "tiny" (a 2-layer model built from a config: tests)."""
    lookup_tasks: int = 300
    """Derived title-lookup tasks (short descriptions and first sentences, alternating)."""
    synth_tasks: int = 14
    """Synthesized SailorFog-QA-V2 research tasks (0: none)."""
    heldout: int = 20
    """Held-out tasks per title-lookup level (description, lead)."""
    synth_heldout: int = 6
    """Held-out synthesized tasks."""
    hop_tasks: int = 0
    """One-hop tasks (level lookup-hop: which page of a type the page with a given short description names
    in its first 200 characters; read from the search hit or the page's visit, sailorfog.hop); at most what
    the simulator has (438 on the default corpus). 0: none."""
    hop_heldout: int = 0
    """Held-out one-hop tasks."""
    seed: int = 0
    """Seed of the tasks, the split, sampling and training."""
    endpoint: str = ""
    """An OpenAI-compatible endpoint (e.g. vLLM's) to evaluate as an extra text policy on the held-out split."""
    endpoint_model: str = ""
    """The model name to ask --endpoint for."""
    sft_steps: int = 28
    """SFT optimizer steps (each a batch of --sft-batch gold trajectories)."""
    sft_batch: int = 4
    """Gold trajectories per SFT step."""
    sft_lr: float = 4e-4
    """SFT learning rate (pretrained model)."""
    train_layers: int = 6
    """Top decoder layers SFT and GRPO train (0: all; the tiny model trains all)."""
    grpo_steps: int = 8
    """GRPO steps after SFT."""
    grpo_tasks_per_step: int = 4
    """Tasks per GRPO step."""
    group_size: int = 4
    """GRPO rollouts per task."""
    grpo_lr: float = 1e-4
    """GRPO learning rate (pretrained model; Adam moves each trained weight by about this much per step).
    2e-5 moved no weight by more than 4e-5 in 2 steps and changed nothing the model does; 3e-4 in 2 steps
    dropped the held-out well-formed turns from 0.87 to 0.57 (9 episodes ran into the token limit);
    1e-4 for 4 steps in the learning benchmark kept them (0.90 -> 0.92). From the SFT model of the
    defaults, 8 steps at 3e-4 (one update each) took held-out sampled success from 0.326 to 0.163, while
    8 steps at 1e-4 with 2 update epochs took it to 0.457 (docs/pipeline.md#grpo-settings)."""
    grpo_update_epochs: int = 2
    """Optimizer steps GRPO takes on each batch of rollouts (the first on-policy, later ones clipped)."""
    grpo_kl_beta: float = 0.0
    """Weight of a KL penalty (k3 estimator, per token) to the SFT model GRPO starts from (0: none, which
    also keeps no frozen copy of the model)."""
    probe: int = 4
    """Train tasks per level the SFT model plays before GRPO, to pick tasks of useful difficulty."""
    grpo_levels: str = ""
    """Fixed shares of GRPO's task pool per level ("lookup-hop=0.6,lookup-lead=0.4") in place of the probe's
    weights (the probe still plays and is reported): a level the SFT model solved on none of the probe's few
    tasks (weight 0) is then trained on. Empty: the probe decides."""
    eval_samples: int = 2
    """Sampled episodes per held-out task for the trained models (sft, grpo); their greedy evaluations
    play each task once. More samples narrow the paired intervals of the sampled differences."""
    threads: int = 0
    """torch CPU threads (0: one, which decodes fastest on a shared 2-core machine)."""
    workers: int = 0
    """Evaluations the eval stage runs at once on a CPU, each in a process of its own on --threads threads
    (0: the CPU cores, at most 4 and at most what the free memory holds at 6 GB each; 1: one after another). A GPU
    run evaluates one model at a time."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the model stages (few-shot, SFT, probe, GRPO, evaluation) run: auto is cuda when a GPU is
    visible, else cpu. The sizes are the same on both; a GPU run may raise them (--lookup-tasks,
    --grpo-steps, --grpo-tasks-per-step, --group-size)."""
    resume: bool = False
    """Continue a run in --out (finished stages are not run again)."""
    overwrite: bool = False
    """Delete the run in --out and start over (only a folder holding this project's run and nothing else)."""
    progress: bool = True
    """Progress bars."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.out:
            raise ValueError("--out is required: the run directory, e.g. runs/demo")
        if self.lookup_tasks < 2 * self.heldout + 2:
            raise ValueError(f"--lookup-tasks must be >= 2 * --heldout + 2 = {2 * self.heldout + 2} (train and "
                             f"held-out tasks of both lookup levels), got {self.lookup_tasks}")
        for name in ("heldout", "synth_tasks", "synth_heldout", "hop_tasks", "hop_heldout", "threads", "workers",
                     "train_layers"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        for name in ("sft_steps", "sft_batch", "grpo_steps", "grpo_tasks_per_step", "group_size", "probe",
                     "grpo_update_epochs", "eval_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"--group-size must be >= 2 (GRPO compares rollouts of one task), got {self.group_size}")
        if self.top_p != 1.0:
            raise ValueError(f"--top-p must be 1 in the main job, got {self.top_p}: GRPO samples where the models are "
                             "evaluated and its log-probabilities are those of the full tempered distribution")
        for name in ("sft_lr", "grpo_lr", "temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {getattr(self, name)}")
        recipe.parse_level_shares(self.grpo_levels)
        if not self.grpo_kl_beta >= 0:
            raise ValueError(f"--grpo-kl-beta must be >= 0, got {self.grpo_kl_beta}")
        if self.resume and self.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if bool(self.endpoint) != bool(self.endpoint_model):
            raise ValueError("--endpoint and --endpoint-model go together")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ValueError("--device cuda was asked for but CUDA is not available: use --device cpu or auto")
        if self.model != "tiny":
            from trainers.models import resolve_model

            resolve_model(self.model)  # a one-line error now, not after the tasks


# ----------------------------------------------------------------------------- run state


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def run_record_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not a run of this pipeline that ``--overwrite`` may delete (None: it is)."""
    state_file = run_dir / RUN_FILE
    if not state_file.is_file():
        return f"it holds no run ({RUN_FILE})"
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"its {RUN_FILE} is not valid JSON ({exc})"
    if not isinstance(state, dict) or state.get("kind") != RUN_KIND:
        return f"its {RUN_FILE} is not a websailor pipeline run record (no \"kind\": \"{RUN_KIND}\")"
    if not isinstance(state.get("stages"), dict) or not isinstance(state.get("config"), dict):
        return f"its {RUN_FILE} has no stages or config"
    others = sorted(p.name for p in run_dir.iterdir() if p.name not in RUN_ENTRIES)
    if others:
        return f"it holds files a run does not write ({', '.join(others[:5])})"
    return None


def open_run(config: PipelineConfig) -> tuple[Path, dict[str, Any]]:
    """The run directory and its state, after the finished/resume/overwrite checks."""
    run_dir = Path(config.out)
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir} exists and is not a directory")
    state_file = run_dir / RUN_FILE
    # Where the run lives is no setting of it: a run directory that was moved still resumes.
    comparable = {k: v for k, v in asdict(config).items()
                  if k not in ("out", "resume", "overwrite", "progress", "threads", "workers", "device")}
    if config.overwrite and run_dir.is_dir() and any(run_dir.iterdir()):
        problem = run_record_problem(run_dir)  # checked before anything is deleted
        if problem:
            raise UserError(f"--overwrite will not delete {run_dir}: {problem}; use another --out")
        shutil.rmtree(run_dir)
    if state_file.is_file():
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UserError(f"{state_file} is not valid JSON ({exc}); use --overwrite to start over") from None
        if not isinstance(state, dict) or state.get("kind") != RUN_KIND or not isinstance(state.get("stages"), dict):
            raise UserError(f"{state_file} is not a websailor pipeline run record; use another --out")
        if state.get("finished") and not config.resume:
            raise UserError(f"{run_dir} holds a finished run; pass --resume to rebuild its report or "
                             "--overwrite to start over")
        recorded = state.get("config") or {}
        # A setting added since the run was recorded counts as unchanged at its default.
        defaults = {f.name: f.default for f in fields(PipelineConfig) if f.default is not MISSING}
        changed = sorted(k for k in comparable if recorded.get(k, defaults.get(k)) != comparable[k])
        if changed:
            raise UserError(f"{run_dir} holds a run with other settings ({', '.join(changed)}); "
                             "use another --out or --overwrite")
    elif run_dir.is_dir() and any(run_dir.iterdir()):
        raise UserError(f"{run_dir} is not empty and holds no run ({RUN_FILE}); use another --out")
    else:
        state = {"kind": RUN_KIND, "config": comparable, "stages": {}, "started_at": _now(), "finished": False}
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(state_file, state)
    return run_dir, state


# ----------------------------------------------------------------------------- driver


def run_pipeline(config: PipelineConfig) -> dict[str, Any]:
    """Run every stage not yet finished; print the one-screen summary; returns the run state."""
    run_dir, state = open_run(config)
    restore_bars = _quiet_libraries()
    import torch

    state["device"] = model_device(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or 1)
    try:
        for name in STAGES:
            done = (state["stages"].get(name) or {}).get("status") == "done"
            if done and name != "report":
                continue
            print(f"==> [{STAGES.index(name) + 1}/{len(STAGES)}] {name}", flush=True)
            start = time.perf_counter()
            if name == STAGES[-1]:
                # The report shows run.json as it stands once the report exists: every stage done.
                state["stages"][name] = {"status": "running", "seconds": None}
                state.update(finished=True, finished_at=_now())
                write_json(run_dir / RUN_FILE, state)
            try:
                result = STAGE_FUNCTIONS[name](config, run_dir)
            except BaseException as exc:
                # run.json says where the run stopped and why; the next call runs this stage again.
                status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                state["stages"][name] = {"status": status, "seconds": _elapsed(start),
                                         "error": f"{type(exc).__name__}: {exc}"[:2000]}
                state["finished"] = False
                state.pop("finished_at", None)
                write_json(run_dir / RUN_FILE, state)
                raise
            state["stages"][name] = {"status": "done", "seconds": _elapsed(start), "result": result}
            write_json(run_dir / RUN_FILE, state)
    finally:
        torch.set_num_threads(threads)
        restore_bars()
    print_summary(run_dir, state)
    return state


def _quiet_libraries() -> Callable[[], None]:
    """No progress bars from transformers' own loading and saving (the stages show their own);
    returns what puts them back."""
    from transformers.utils import logging as hf_logging

    if not hf_logging.is_progress_bar_enabled():
        return lambda: None
    hf_logging.disable_progress_bar()
    return hf_logging.enable_progress_bar


def _elapsed(start: float) -> float:
    """Seconds since ``start``, never 0 for a stage that ran (a reused simulator takes milliseconds)."""
    return round(max(time.perf_counter() - start, 1e-4), 4)


def seconds_text(seconds: float) -> str:
    """``12.3s``, or ``40ms`` under a tenth of a second (a stage that ran never shows as 0)."""
    return f"{seconds:.1f}s" if seconds >= 0.1 else f"{max(seconds * 1000, 1):.0f}ms"


def _ci(s: dict[str, Any], key: str = "success_ci95") -> str:
    lo, hi = (s.get(key) or [0.0, 1.0])[:2]
    return f"[{lo:.2f}, {hi:.2f}]"


def summary_lines(run_dir: Path, state: dict[str, Any]) -> list[str]:
    """The one-screen summary: per policy success with its 95% interval, well-formed turns, tool
    calls, terminations; success per level; GRPO's signal steps; the stages' times."""
    summary_file = run_dir / "eval" / "summary.json"
    summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.is_file() else {}
    tasks = (state["stages"].get("tasks") or {}).get("result") or {}
    config = state.get("config") or {}
    width = max([10, *(len(str(name)) for name in summary)])
    lines = [f"run: {run_dir}   model: {config.get('model')}   env: websailor/WikiSim-v0 (compact), "
             f"corpus: {config.get('wiki_dir')}   device: {state.get('device') or config.get('device', 'cpu')}",
             f"tasks: {tasks.get('tasks', '?')} (train {tasks.get('train', '?')}, held-out {tasks.get('heldout', '?')}: "
             + ", ".join(f"{k} {v}" for k, v in (tasks.get("heldout_per_level") or {}).items()) + ")",
             f"{'policy':<{width}} {'success':>7} {'95% interval':>13} {'well-formed':>11} {'tool calls':>10}  terminations"]
    for name, s in summary.items():
        ends = ", ".join(f"{k}={v}" for k, v in sorted((s.get("terminations") or {}).items()))
        lines.append(f"{name:<{width}} {s.get('success', 0.0):>7.3f} {_ci(s):>13} {s.get('well_formed_turns', 0.0):>11.3f} "
                     f"{s.get('mean_tool_calls', 0.0):>10.2f}  {ends}")
    if summary:
        lines.append(recipe.decoding_text(summary))
    lines += _comparison_lines(run_dir, summary)
    levels = sorted({lv for s in summary.values() for lv in (s.get("per_level") or {})})
    if levels:
        lines.append("success per level: " + "; ".join(
            f"{lv}: " + " ".join(f"{name} {((s.get('per_level') or {}).get(lv) or {}).get('success', 0.0):.2f}"
                                 for name, s in summary.items()) for lv in levels))
    grpo = (state["stages"].get("grpo") or {}).get("result") or {}
    if grpo:
        lines.append(f"grpo: {grpo.get('steps')} steps, {grpo.get('signal_steps')} with signal (updated the model), "
                     f"{grpo.get('no_signal_steps')} without; max weight change {grpo.get('max_weight_change', 0):.2e}; "
                     f"probe success {json.dumps(grpo.get('probe_success'))}"
                     + (f"; {grpo['groups_drawn']} groups drawn from a pool of {grpo['pool_tasks']} tasks"
                        if grpo.get("pool_tasks") else "")
                     + (f" ({grpo['probe_fallback']})" if grpo.get("probe_fallback") else ""))
    done = {k: v for k, v in state["stages"].items() if isinstance((v or {}).get("seconds"), (int, float))}
    total = sum(float(v["seconds"]) for v in done.values())
    lines.append("stages: " + ", ".join(f"{k} {seconds_text(float(v['seconds']))}" for k, v in done.items())
                 + f"  (total {total:.0f}s)")
    lines.append(f"report: {run_dir / 'report.html'}")
    return lines


def _comparison_lines(run_dir: Path, summary: dict[str, Any]) -> list[str]:
    """``sft - fewshot`` and ``grpo - sft`` (:func:`websailor.recipe.comparisons`), one line each."""
    from websailor.recipe import comparisons

    lines = []
    for c in comparisons(run_dir / "eval", summary):
        kind = "paired 95% interval" if c["paired"] else "unpaired 95% interval"
        on = f" on the same {c['tasks']} held-out tasks" if c["paired"] else ""
        lines.append(f"{c['a']} - {c['b']}: success {c['difference']:+.3f}, {kind} [{c['low']:+.3f}, "
                     f"{c['high']:+.3f}]{on} ({c['verdict']})")
    return lines


def print_summary(run_dir: Path, state: dict[str, Any]) -> None:
    print()
    print("\n".join(summary_lines(run_dir, state)))


@dataclass
class ReportConfig:
    """Rebuild report.html from a run directory's files."""

    run_dir: str = field(metadata={"positional": True})
    """The run directory (written by `websailor pipeline`)."""


def run_report(config: ReportConfig) -> int:
    """A pipeline run's report, or (a folder without ``run.json``) an eval, SFT or GRPO folder's."""
    from websailor.report import build_report

    folder = Path(config.run_dir)
    if folder.is_dir() and not (folder / RUN_FILE).is_file():
        from websailor.folder_report import build_folder_report

        print(build_folder_report(folder))
        return 0
    print(build_report(folder))
    return 0
