"""``websailor pipeline --out runs/NAME``: the whole system, end to end, on the embedded default.

Stages, each reading the files the one before wrote into the run directory:

1. ``simulator``: build (or reuse) the offline Wikipedia simulator;
2. ``synth``: synthesize SailorFog-QA-V2 tasks, split into ``tasks/train.jsonl`` and
   ``tasks/heldout.jsonl`` by seed; the oracle's gold trajectories go to
   ``trajectories/oracle.jsonl``;
3. ``baselines``: the random and scripted heuristic policies on the held-out split, through
   ``gym.make("websailor/WikiSim-v0")``;
4. ``sft``: SFT cold start on the oracle trajectories (a tiny CPU model built from a config, or
   ``--model PATH``);
5. ``grpo``: a few GRPO steps from the SFT model on the train split;
6. ``eval``: the SFT and GRPO models on the held-out split (or ``--endpoint``, a vLLM or other
   OpenAI-compatible server, evaluated as a text policy);
7. ``report``: ``report.html`` (:mod:`websailor.report`).

``run.json`` records the configuration and each finished stage, so an interrupted run resumes
from its last finished stage. A finished run is not touched again unless ``--resume`` (re-run
nothing that is done; rebuild the report) or ``--overwrite`` (start over).

A tiny byte-level model cannot read 10,000-token transcripts on a CPU in minutes, so with the
default model the environment is *compact* (the short system prompt of :mod:`trainers.gold`,
two search hits per query, visits cut to 400 characters) and the oracle trajectories are cut
the same way before SFT; ``--model PATH`` uses the full environment.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

STAGES = ("simulator", "synth", "baselines", "sft", "grpo", "eval", "report")
RUN_FILE = "run.json"
COMPACT_TOOL_CHARS = 400


@dataclass
class PipelineConfig:
    """Run the whole system on the embedded default: simulator, synthesized tasks, baselines,
    SFT cold start, a few GRPO steps, evaluation and report.html, all under --out."""

    out: str = field(metadata={"flag": "--out"})
    """The run directory (created; refused if it holds a finished run, unless --resume or --overwrite)."""
    wiki_dir: str = "data/wiki"
    """The simulator directory (built from the embedded default corpus if missing)."""
    tasks: int = 40
    """How many tasks to synthesize (train + held-out)."""
    heldout: float = 0.25
    """Share of the tasks held out for evaluation."""
    seed: int = 0
    """Seed of synthesis, the split, the tiny model, sampling and training."""
    model: str = ""
    """A local model directory, or a short name (smollm2-135m), to train instead of the tiny CPU model."""
    endpoint: str = ""
    """An OpenAI-compatible endpoint (e.g. vLLM's) to evaluate as an extra text policy on the held-out split."""
    endpoint_model: str = ""
    """The model name to ask --endpoint for."""
    sft_epochs: int = 20
    """SFT passes over the oracle trajectories (20 on the 30 default train tasks: the tiny model's turns
    are then well formed; 3 leaves it writing malformed turns)."""
    grpo_steps: int = 3
    """GRPO steps after SFT."""
    group_size: int = 4
    """GRPO rollouts per task."""
    max_new_tokens: int = 160
    """Tokens per assistant turn when a model plays."""
    max_tool_calls: int = 6
    """Tool-call budget per episode when a model plays."""
    threads: int = 0
    """torch CPU threads (0: one with the tiny default model, whose small matrices gain nothing from more and
    lose much to thread contention on a busy machine; torch's default with --model)."""
    resume: bool = False
    """Continue a run in --out (finished stages are not run again)."""
    overwrite: bool = False
    """Delete what --out holds and start over."""
    progress: bool = True
    """Progress bars."""

    def __post_init__(self) -> None:
        if not self.out:
            raise ValueError("--out is required: the run directory, e.g. runs/demo")
        if self.tasks < 4:
            raise ValueError(f"--tasks must be >= 4 (a train and a held-out split), got {self.tasks}")
        if not 0.0 < self.heldout < 1.0:
            raise ValueError(f"--heldout must be in (0, 1), got {self.heldout}")
        if self.threads < 0:
            raise ValueError(f"--threads must be >= 0 (0: automatic), got {self.threads}")
        for name in ("sft_epochs", "grpo_steps", "group_size", "max_new_tokens", "max_tool_calls"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.resume and self.overwrite:
            raise ValueError("--resume and --overwrite exclude each other")
        if bool(self.endpoint) != bool(self.endpoint_model):
            raise ValueError("--endpoint and --endpoint-model go together")
        if self.model:
            from trainers.models import resolve_model

            resolve_model(self.model)  # a one-line error now, not after synthesis


# ----------------------------------------------------------------------------- run state


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    os.replace(tmp, path)


def open_run(config: PipelineConfig) -> tuple[Path, dict[str, Any]]:
    """The run directory and its state, after the finished/resume/overwrite checks."""
    run_dir = Path(config.out)
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"--out {run_dir} exists and is not a directory")
    state_file = run_dir / RUN_FILE
    # Where the run lives is no setting of it: a run directory that was moved still resumes.
    comparable = {k: v for k, v in asdict(config).items()
                  if k not in ("out", "resume", "overwrite", "progress", "threads")}
    if config.overwrite and run_dir.is_dir() and any(run_dir.iterdir()):
        if not state_file.is_file():
            raise ValueError(f"{run_dir} holds no run ({RUN_FILE}), so --overwrite will not delete it; "
                             "use another --out")
        shutil.rmtree(run_dir)
    if state_file.is_file():
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{state_file} is not valid JSON ({exc}); use --overwrite to start over") from None
        if not isinstance(state, dict) or not isinstance(state.get("stages"), dict):
            raise ValueError(f"{state_file} is not a run record (no stages); use --overwrite to start over")
        if state.get("finished") and not config.resume:
            raise ValueError(f"{run_dir} holds a finished run; pass --resume to rebuild its report or "
                             "--overwrite to start over")
        changed = sorted(k for k in comparable if (state.get("config") or {}).get(k) != comparable[k])
        if changed:
            raise ValueError(f"{run_dir} holds a run with other settings ({', '.join(changed)}); "
                             "use another --out or --overwrite")
    elif run_dir.is_dir() and any(run_dir.iterdir()):
        raise ValueError(f"{run_dir} is not empty and holds no run ({RUN_FILE}); use another --out")
    else:
        state = {"config": comparable, "stages": {}, "started_at": _now(), "finished": False}
    run_dir.mkdir(parents=True, exist_ok=True)
    _write_json(state_file, state)
    return run_dir, state


# ----------------------------------------------------------------------------- stages


def stage_simulator(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
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
                raise ValueError(f"{exc} (the pipeline rebuilds only the embedded default by itself)") from None
    info = build("default", None, wiki, workers=2, progress=config.progress)
    return {"wiki_dir": str(wiki), "built": True, "pages": (info.get("counts") or {}).get("pages")}


def split_tasks(records: list[dict], heldout: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Train and held-out splits, decided by the seed alone (same seed, same split)."""
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    n_held = max(1, min(len(records) - 1, round(len(records) * heldout)))
    held = set(order[:n_held])
    return ([r for i, r in enumerate(records) if i not in held], [r for i, r in enumerate(records) if i in held])


def stage_synth(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
    from sailorfog.cli import SynthConfig, run_synth

    all_tasks = run_dir / "tasks" / "all.jsonl"
    all_tasks.parent.mkdir(parents=True, exist_ok=True)
    summary = run_synth(SynthConfig(wiki=config.wiki_dir, out=str(all_tasks), n=config.tasks, seed=config.seed,
                                    progress=config.progress))
    records = [json.loads(line) for line in all_tasks.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(records) < 2:
        raise ValueError(f"synthesis produced {len(records)} task(s); at least 2 are needed for a train/held-out split")
    train, held = split_tasks(records, config.heldout, config.seed)
    _write_jsonl(run_dir / "tasks" / "train.jsonl", train)
    _write_jsonl(run_dir / "tasks" / "heldout.jsonl", held)
    oracle = [r["oracle"] for r in train if isinstance(r.get("oracle"), dict)]
    _write_jsonl(run_dir / "trajectories" / "oracle.jsonl", oracle)
    return {"tasks": len(records), "train": len(train), "heldout": len(held), "oracle_trajectories": len(oracle),
            "synth": {k: v for k, v in summary.items() if isinstance(v, (int, float, str))}}


def compact_trajectory(record: dict, system_prompt: str, max_chars: int = COMPACT_TOOL_CHARS) -> dict:
    """The trajectory with the compact system prompt and each tool response cut to ``max_chars``
    (what the compact environment shows), for a tiny model's SFT."""
    messages = []
    for m in record.get("messages") or []:
        content = str(m.get("content", ""))
        if m.get("role") == "system":
            content = system_prompt
        elif m.get("role") == "user" and content.startswith("<tool_response>") and len(content) > max_chars + 40:
            content = content[:max_chars] + "\n</tool_response>"
        messages.append({"role": m.get("role"), "content": content})
    return {**record, "messages": messages}


def env_kwargs(config: PipelineConfig) -> dict[str, Any]:
    """What ``gym.make("websailor/WikiSim-v0", ...)`` gets when a model plays (compact for the tiny model)."""
    kwargs: dict[str, Any] = {"wiki_dir": config.wiki_dir, "max_tool_calls": config.max_tool_calls}
    if not config.model:
        from envs.wikisim import SHARED_SIMS
        from trainers.gold import COMPACT_SYSTEM_PROMPT, ShortVisit, TopKSearch

        sim, _release = SHARED_SIMS.acquire(config.wiki_dir)  # the process's shared simulator, held for its life
        kwargs.update(tools=[TopKSearch(sim), ShortVisit(sim)], system_prompt=COMPACT_SYSTEM_PROMPT,
                      current_date="2025-01-01")
    return kwargs


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def stage_baselines(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
    held = _read_jsonl(run_dir / "tasks" / "heldout.jsonl")
    out = {}
    for name in ("random", "heuristic"):
        out[name] = evaluate_policy(config, run_dir, name, name, held, {"wiki_dir": config.wiki_dir})
    return out


def _model_source(config: PipelineConfig, run_dir: Path) -> str:
    if config.model:
        from trainers.models import resolve_model

        return resolve_model(config.model)
    import itertools

    from trainers.subword import train_subword_tokenizer, transcript_corpus, wiki_corpus
    from trainers.tiny_lm import save_tiny_lm

    path = run_dir / "model" / "init"
    if not (path / "config.json").is_file():
        # The tiny model reads subwords (trainers.subword, trained here on the simulator's pages and the
        # compact oracle trajectories; markers and protocol tags are one token each), not bytes: its turns
        # are ~3.5x fewer tokens, so --max-new-tokens covers a whole turn and SFT learns the format faster.
        compact = run_dir / "trajectories" / "oracle.compact.jsonl"
        transcripts = transcript_corpus(_read_jsonl(compact), repeat=10) if compact.is_file() else []
        tokenizer = train_subword_tokenizer(itertools.chain(wiki_corpus(config.wiki_dir), transcripts),
                                            vocab_size=2048)
        save_tiny_lm(path, layers=2, hidden=128, heads=4, seed=config.seed, max_positions=8192, tokenizer=tokenizer)
    return str(path)


def stage_sft(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
    from trainers.gold import COMPACT_SYSTEM_PROMPT
    from trainers.sft import SFTConfig, train

    data = run_dir / "trajectories" / "oracle.jsonl"
    if not config.model:
        compact = run_dir / "trajectories" / "oracle.compact.jsonl"
        _write_jsonl(compact, [compact_trajectory(r, COMPACT_SYSTEM_PROMPT) for r in _read_jsonl(data)])
        data = compact
    sft = SFTConfig(data=[str(data)], model=_model_source(config, run_dir), output_dir=str(run_dir / "sft"),
                    lr=3e-3 if not config.model else 5e-6, batch_size=4, epochs=config.sft_epochs, seed=config.seed,
                    max_tokens=8192, min_tool_calls=1, save_every=1000, tensorboard="off", warmup_ratio=0.1)
    bar = None
    if config.progress:
        from tqdm.auto import tqdm

        records = sum(1 for line in data.read_text(encoding="utf-8").splitlines() if line.strip())
        # An upper bound: the rejection filters may keep fewer trajectories.
        bar = tqdm(total=config.sft_epochs * -(-records // sft.batch_size), desc="sft", unit="step")

    def on_step(metrics: dict[str, Any]) -> None:
        if bar is not None:
            epoch, step = metrics.get("train/epoch"), metrics.get("step")
            if isinstance(epoch, (int, float)) and epoch > 0 and isinstance(step, int):
                bar.total = round(step / epoch * config.sft_epochs)  # exact once the filters have run
            bar.update(step - bar.n if isinstance(step, int) else 1)  # a resumed run starts past 0
            if isinstance(metrics.get("loss/sft"), (int, float)):
                bar.set_postfix(loss=f"{metrics['loss/sft']:.3f}", refresh=False)

    try:
        result = train(sft, on_step=on_step)
    finally:
        if bar is not None:
            bar.close()
    if not result.model_dir:
        raise ValueError(f"SFT kept no trajectory ({result.filter_report}); synthesize more tasks (--tasks)")
    return {"steps": result.steps, "final_loss": result.final_loss, "filters": result.filter_report,
            "model_dir": result.model_dir}


def stage_grpo(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
    from trainers.grpo import GRPOConfig, GRPOTrainer
    from trainers.grpo_state import DistInfo  # noqa: F401  (fails early if the GRPO module is incomplete)
    from trainers.tiny_lm import load_tokenizer
    from transformers import AutoModelForCausalLM

    model_dir = run_dir / "sft" / "model"
    train_tasks = _read_jsonl(run_dir / "tasks" / "train.jsonl")
    tasks_per_step = max(1, min(2, len(train_tasks)))
    grpo = GRPOConfig(model=str(model_dir), tasks=str(run_dir / "tasks" / "train.jsonl"),
                      output_dir=str(run_dir / "grpo"), steps=config.grpo_steps,
                      batch_size=tasks_per_step * config.group_size, group_size=config.group_size,
                      micro_batch_size=config.group_size, learning_rate=1e-4 if not config.model else 1e-6,
                      max_new_tokens=config.max_new_tokens, max_tool_calls=config.max_tool_calls,
                      pool_size=len(train_tasks), save_every=0, seed=config.seed, device="cpu",
                      tensorboard="off", progress=config.progress, resume=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    trainer = GRPOTrainer(grpo, model, load_tokenizer(model_dir), train_tasks,
                          env_kwargs={"tasks": train_tasks, **env_kwargs(config)})
    try:
        history = trainer.train()
    finally:
        trainer.dist.destroy()
    last = history[-1] if history else {}
    return {"steps": trainer.step, "last": {k: v for k, v in last.items() if isinstance(v, (int, float))}}


def evaluate_policy(config: PipelineConfig, run_dir: Path, name: str, policy: Any, tasks: list[dict],
                    kwargs: dict[str, Any]) -> dict[str, Any]:
    """Play ``policy`` (a baseline name or a policy backend) on ``tasks``; write
    ``eval/NAME.jsonl``, ``eval/NAME.trajectories.jsonl`` and merge ``eval/summary.json``."""
    from trainers.eval import EvalConfig, per_task_rows, play_baseline, summarize
    from trainers.rollout import RolloutConfig, collect

    eval_dir = run_dir / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    record = EvalConfig(tasks=str(run_dir / "tasks" / "heldout.jsonl"), policy="heuristic", name=name,
                        out=str(eval_dir), wiki_dir=config.wiki_dir, max_tool_calls=config.max_tool_calls,
                        seed=config.seed)
    rollout = RolloutConfig(env_id="websailor/WikiSim-v0", env_kwargs=kwargs, max_new_tokens=config.max_new_tokens,
                            temperature=0.85, top_p=0.95, num_envs=4, tool_workers=4, max_total_tokens=8192,
                            max_episode_seconds=300.0, policy_name=name, seed=config.seed)
    rollout.env_kwargs = {"tasks": tasks, **kwargs}  # every episode is given its task; these make the env
    start = time.perf_counter()
    if isinstance(policy, str):
        trajectories = play_baseline(policy, tasks, rollout, 1)
    else:
        trajectories = collect(policy, tasks, rollout, group_size=1, progress=config.progress)
    rows = per_task_rows(trajectories, 1)
    summary = summarize(rows, trajectories, record, time.perf_counter() - start)
    summary["tasks_split"] = "heldout"
    _write_jsonl(eval_dir / f"{name}.jsonl", rows)
    _write_jsonl(eval_dir / f"{name}.trajectories.jsonl", [t.to_record() for t in trajectories])
    path = eval_dir / "summary.json"
    merged = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    merged[name] = summary
    _write_json(path, merged)
    return {k: summary[k] for k in ("pass@1", "mean_tool_calls", "terminations")}


def stage_eval(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
    from trainers.policies import TransformersPolicy
    from trainers.tiny_lm import load_tokenizer
    from transformers import AutoModelForCausalLM

    held = _read_jsonl(run_dir / "tasks" / "heldout.jsonl")
    kwargs = env_kwargs(config)
    out = {}
    for name, model_dir in (("sft", run_dir / "sft" / "model"), ("grpo", run_dir / "grpo" / "model")):
        if not model_dir.is_dir():
            continue
        model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
        policy = TransformersPolicy(model, load_tokenizer(model_dir), device="cpu")
        out[name] = evaluate_policy(config, run_dir, name, policy, held, kwargs)
    if config.endpoint:
        from trainers.policies import OpenAIPolicy

        policy = OpenAIPolicy(config.endpoint, config.endpoint_model, api_key=os.environ.get("OPENAI_API_KEY"))
        out["endpoint"] = evaluate_policy(config, run_dir, "endpoint", policy, held, {"wiki_dir": config.wiki_dir})
    return out


def stage_report(config: PipelineConfig, run_dir: Path) -> dict[str, Any]:
    from websailor.report import build_report

    return {"report": str(build_report(run_dir))}


STAGE_FUNCTIONS: dict[str, Callable[[PipelineConfig, Path], dict[str, Any]]] = {
    "simulator": stage_simulator, "synth": stage_synth, "baselines": stage_baselines, "sft": stage_sft,
    "grpo": stage_grpo, "eval": stage_eval, "report": stage_report,
}


# ----------------------------------------------------------------------------- driver


def run_pipeline(config: PipelineConfig) -> dict[str, Any]:
    """Run every stage not yet finished; print the one-screen summary; returns the run state."""
    run_dir, state = open_run(config)
    restore_bars = _quiet_libraries()
    import torch

    threads = torch.get_num_threads()
    if config.threads or not config.model:
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
                state["stages"][name] = {"status": "done", "seconds": 0.0}
                state.update(finished=True, finished_at=_now())
                _write_json(run_dir / RUN_FILE, state)
            try:
                result = STAGE_FUNCTIONS[name](config, run_dir)
            except BaseException as exc:
                # run.json says where the run stopped and why; the next call runs this stage again.
                status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                state["stages"][name] = {"status": status, "seconds": round(time.perf_counter() - start, 2),
                                         "error": f"{type(exc).__name__}: {exc}"[:2000]}
                state["finished"] = False
                state.pop("finished_at", None)
                _write_json(run_dir / RUN_FILE, state)
                raise
            state["stages"][name] = {"status": "done", "seconds": round(time.perf_counter() - start, 2),
                                     "result": result}
            _write_json(run_dir / RUN_FILE, state)
    finally:
        torch.set_num_threads(threads)
        restore_bars()
    if not state.get("finished"):  # pragma: no cover - the report stage always runs last
        state.update(finished=True, finished_at=_now())
        _write_json(run_dir / RUN_FILE, state)
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


def print_summary(run_dir: Path, state: dict[str, Any]) -> None:
    summary_file = run_dir / "eval" / "summary.json"
    summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.is_file() else {}
    synth = (state["stages"].get("synth") or {}).get("result") or {}
    print()
    print(f"run: {run_dir}   tasks: {synth.get('tasks', '?')} (train {synth.get('train', '?')}, "
          f"held-out {synth.get('heldout', '?')})")
    print(f"{'policy':<12} {'success':>8} {'tool calls':>10}  terminations")
    for name, s in summary.items():
        ends = ", ".join(f"{k}={v}" for k, v in sorted((s.get("terminations") or {}).items()))
        print(f"{name:<12} {s.get('pass@1', 0.0):>8.3f} {s.get('mean_tool_calls', 0.0):>10.2f}  {ends}")
    total = sum(float((v or {}).get("seconds", 0.0)) for v in state["stages"].values())
    print(f"stages: " + ", ".join(f"{k} {v.get('seconds', 0):.0f}s" for k, v in state["stages"].items())
          + f"  (total {total:.0f}s)")
    print(f"report: {run_dir / 'report.html'}")


@dataclass
class ReportConfig:
    """Rebuild report.html from a run directory's files."""

    run_dir: str = field(metadata={"positional": True})
    """The run directory (written by `websailor pipeline`)."""


def run_report(config: ReportConfig) -> int:
    from websailor.report import build_report

    print(build_report(config.run_dir))
    return 0
