"""Evaluation: pass@1 and pass@k over a task file with any policy (``websailor eval``).

Every task is played ``k`` times (sampling as the paper's evaluation by default:
temperature 0.85, top-p 0.95) with a policy backend (a local ``transformers`` model, vLLM,
an OpenAI-compatible endpoint) or one of the baseline policies of :mod:`envs.baselines`,
and judged by the environment's judge (exact match / F1, or the LLM grader). pass@k is the
unbiased estimator of Chen et al. (2021): ``1 - C(n - c, k) / C(n, k)`` for ``c`` correct of
``n`` samples; pass@1 is ``c / n``.

Writes, under ``out``: ``<name>.jsonl`` (one line per task: samples, correct count,
pass@1, pass@k, predictions, terminations), ``<name>.trajectories.jsonl``, and
``summary.json`` (``{name: summary}``, merged with what is there). Prints a table and,
last, the summary as one JSON line. ``--sweep-tool-calls``/``--sweep-context-tokens`` add
the budget sweep (:mod:`trainers.budget_sweep`): accuracy against each budget, as a PNG.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import threading
import time
from collections import Counter
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal, Mapping, Sequence

from trainers.rollout_options import EnvOptions, EpisodeOptions

from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import write_json_atomic

PolicyKind = Literal["transformers", "vllm", "openai", "heuristic", "random"]
JudgeKind = Literal["em_f1", "f1", "llm"]
BASELINES = ("heuristic", "random")
MAX_ERROR_SHARE = 0.5
"""A run whose share of episodes without a verdict (policy or environment errors) is above this fails
(non-zero exit)."""
MAX_JUDGE_ERROR_RATE = 0.02
"""Default share of answers the judge may fail to grade (each scores as wrong) before a run fails."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``c`` correct of ``n`` samples: ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"expected 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class EvalConfig(EpisodeOptions, EnvOptions):
    """Evaluate a policy on a task file: pass@1 and pass@k, per-task results, termination
    reasons; optionally a budget sweep (accuracy against tool-call and context budgets).
    The environment and sampling options are :mod:`trainers.rollout_options`'s, shared with ``websailor grpo``."""

    tasks: str
    """Task JSONL file ({"question", "answer"} per line; optional id, aliases)."""
    _: KW_ONLY
    temperature: float = 0.85
    top_p: float = 0.95
    policy: PolicyKind = "heuristic"
    """Backend: transformers (local model dir), vllm (GPU), openai (endpoint), or a baseline."""
    model: str = ""
    """Model directory or short name such as smollm2-135m (transformers, vllm), or the endpoint's model name (openai)."""
    tokenizer: str = ""
    """Tokenizer for --policy transformers: a directory, or "byt5" for transformers.ByT5Tokenizer()
    (no files); default: the model directory's."""
    base_url: str = ""
    """OpenAI-compatible API root for --policy openai, e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's API key (policy and judge), if any."""
    name: str = ""
    """Name of the results (files <out>/<name>.jsonl); default: the model's path by its last two parts
    (runs/sft/model -> sft_model), or the policy."""
    out: str = "eval"
    """Output directory."""
    overwrite: bool = False
    """Replace results of the same name in --out (without it, an existing name is refused)."""
    k: int = 1
    """Samples per task; pass@k is reported for this k (and pass@1)."""
    max_context_tokens: int = 131072
    """Transcript budget per episode (tokens)."""
    judge: JudgeKind = "em_f1"
    """Answer judge: exact match (em_f1), F1 reward (f1), or the LLM grader (llm)."""
    judge_base_url: str = ""
    """OpenAI-compatible API root of the LLM grader (--judge llm)."""
    judge_model: str = ""
    """The LLM grader's model name (--judge llm)."""
    judge_timeout_s: float = 60.0
    """--judge llm: deadline of one grader request in seconds (connect, send, the whole reply)."""
    judge_retries: int = 3
    """--judge llm: retries of a failed grader request (a hanging grader costs about
    (retries + 1) x --judge-timeout-s per answer)."""
    max_judge_error_rate: float = MAX_JUDGE_ERROR_RATE
    """Largest share of episodes whose answer the judge could not grade (scored as wrong); above it the
    run stops as soon as that is certain and exits non-zero."""
    num_envs: int = 8
    """Episodes at once."""
    max_episode_seconds: float | None = 1800.0
    """Wall-clock limit per episode."""
    limit: int | None = None
    """Evaluate only the first N tasks."""
    device: str = "cpu"
    """Device of the transformers backend."""
    seed: int = 0
    """Sampling and environment seed: each episode gets its own generator, seeded from (seed, task, sample)."""
    schedule: Literal["lockstep", "async"] = "lockstep"
    """lockstep: generate once every running episode waits for the model, so batches are the same on every
    run and the same seed, weights and tasks give byte-identical trajectories; async: generate for whichever
    episodes are ready (faster with slow tools; the same samples except where batch shape moves a logit's
    last bits)."""
    sweep_tool_calls: list[int] | None = None
    """Budget sweep: tool-call budgets to evaluate at (e.g. 1 2 4 8)."""
    sweep_context_tokens: list[int] | None = None
    """Budget sweep: context budgets (tokens) to evaluate at."""
    progress: bool | None = None
    """Episode progress bar on stderr (success so far, tool calls, tokens/s, ETA); default: when stderr is a
    terminal."""
    chat_template: Literal["auto", "on", "off"] = "auto"
    """Token policies: the tokenizer's chat template (``auto``: when it has one) or the ChatML fallback (``off``)."""

    own_options: ClassVar[dict[str, str]] = {**EnvOptions.own_options, "max_context_tokens": "--max-context-tokens",
                                             "judge": "--judge", "tokenizer": "the policy's tokenizer"}

    def __post_init__(self) -> None:
        EpisodeOptions.__post_init__(self)
        EnvOptions.__post_init__(self)
        if self.chat_template not in ("auto", "on", "off"):
            raise ValueError(f"chat_template must be one of ['auto', 'on', 'off'], got {self.chat_template!r}")
        if not Path(self.tasks).is_file():
            raise ValueError(f"task file not found: {self.tasks}")
        if self.policy in ("transformers", "vllm", "openai") and not self.model:
            raise ValueError(f"--policy {self.policy} needs --model")
        if self.policy == "openai" and not self.base_url:
            raise ValueError("--policy openai needs --base-url (an OpenAI-compatible API root)")
        if self.judge == "llm" and not (self.judge_base_url and self.judge_model):
            raise ValueError("--judge llm needs --judge-base-url and --judge-model")
        if (isinstance(self.judge_timeout_s, bool) or not isinstance(self.judge_timeout_s, (int, float))
                or not 0 < self.judge_timeout_s <= 3600):
            raise ValueError(f"--judge-timeout-s must be in (0, 3600] seconds, got {self.judge_timeout_s!r}")
        if isinstance(self.judge_retries, bool) or not isinstance(self.judge_retries, int) or not 0 <= self.judge_retries <= 10:
            raise ValueError(f"--judge-retries must be an integer in [0, 10], got {self.judge_retries!r}")
        if not (isinstance(self.max_judge_error_rate, (int, float)) and 0 <= self.max_judge_error_rate <= 1):
            raise ValueError(f"--max-judge-error-rate must be in [0, 1], got {self.max_judge_error_rate!r}")
        for field_name in ("k", "max_context_tokens", "num_envs"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{field_name.replace('_', '-')} must be a positive integer, got {value!r}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        for field_name in ("sweep_tool_calls", "sweep_context_tokens"):
            values = getattr(self, field_name)
            if values is not None and (not values or any(not isinstance(v, int) or v < 1 for v in values)):
                raise ValueError(f"--{field_name.replace('_', '-')} must list positive integers, got {values!r}")
        self.require_simulator()

    @property
    def results_name(self) -> str:
        """File-safe name of the results: ``name``, else the model's path by its last two parts
        (``runs/sft/model`` -> ``sft_model``: two models both in a folder named ``model`` get
        different names; a name in use is refused, :func:`check_results_name`), else the policy."""
        if self.name:
            name = self.name
        elif self.model:
            parts = [p for p in Path(self.model.rstrip("/")).parts if p not in ("/", ".", "..")]
            name = "_".join(parts[-2:])
        else:
            name = ""
        return re.sub(r"[^A-Za-z0-9._-]", "_", name or self.policy).lstrip(".") or self.policy


def _api_key(config: EvalConfig) -> str | None:
    return os.environ.get(config.api_key_env) or None


def load_policy(config: EvalConfig) -> Any:
    """The policy backend the config names (baselines are played by :func:`evaluate` directly)."""
    if config.policy in BASELINES:
        return config.policy
    if config.policy == "openai":
        from trainers.policies import OpenAIPolicy

        timeout = min(300.0, config.max_episode_seconds or 300.0)  # one turn never outlives its episode
        return OpenAIPolicy(config.base_url, config.model, api_key=_api_key(config), timeout=timeout)
    from trainers.models import load_pretrained, load_tokenizer, resolve_model

    folder = resolve_model(config.model)
    if config.policy == "vllm":
        from trainers.policies import VLLMPolicy

        return VLLMPolicy(folder, seed=config.seed)
    from trainers.policies import TransformersPolicy

    tokenizer = load_tokenizer(config.tokenizer or folder)
    model = load_pretrained(folder).eval()
    return TransformersPolicy(model, tokenizer, device=config.device)


def _judge(config: EvalConfig) -> Any:
    if config.judge != "llm":
        return config.judge
    from envs.judges import LLMJudge

    return LLMJudge(config.judge_base_url, config.judge_model, api_key=_api_key(config),
                    timeout=float(config.judge_timeout_s), max_retries=config.judge_retries)


def env_kwargs(config: EvalConfig, policy: Any = None) -> dict[str, Any]:
    """``gym.make`` keyword arguments for the config (the policy's tokenizer counts the context)."""
    kwargs: dict[str, Any] = {"tasks": config.tasks, "max_tool_calls": config.max_tool_calls,
                              "max_context_tokens": config.max_context_tokens, "judge": _judge(config),
                              **config.env_options()}
    tokenizer = getattr(policy, "tokenizer", None)
    if tokenizer is not None:
        kwargs["tokenizer"] = tokenizer
    return kwargs


def evaluate(policy: Any, tasks: Sequence[Mapping[str, Any]], config: EvalConfig,
             on_trajectory: Callable[[Any], None] | None = None) -> tuple[list[dict], dict, list]:
    """Play ``k`` episodes per task; returns (per-task rows, summary, trajectories).
    ``on_trajectory(t)`` is called as each episode finishes (one thread at a time)."""
    from envs.tokens import template_switch
    from trainers.rollout import RolloutConfig, iter_collect

    rollout = RolloutConfig(
        env_id=config.env_id, env_kwargs=env_kwargs(config, policy), max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, top_p=config.top_p, num_envs=config.num_envs,
        tool_workers=config.num_envs, max_total_tokens=config.max_context_tokens + config.max_new_tokens,
        max_episode_seconds=config.max_episode_seconds, policy_name=config.results_name, seed=config.seed,
        schedule=config.schedule, use_chat_template=template_switch(config.chat_template))
    start = time.perf_counter()
    watch = ErrorWatch(len(tasks) * config.k, config.max_judge_error_rate, on_trajectory)
    if isinstance(policy, str):
        trajectories = play_baseline(policy, tasks, rollout, config.k, watch)
    else:
        from trainers.progress import enabled

        trajectories = []
        episodes = iter_collect(policy, tasks, rollout, group_size=config.k, progress=enabled(config.progress))
        try:
            for traj in episodes:
                trajectories.append(traj)
                watch(traj)
        finally:
            episodes.close()  # a stop (too many errors) ends the running episodes too
        trajectories.sort(key=lambda t: t.index)
    rows = per_task_rows(trajectories, config.k)
    return rows, summarize(rows, trajectories, config, time.perf_counter() - start), trajectories


class TooManyErrors(UserError):
    """The run stopped early: its error budget is certainly spent."""


class ErrorWatch:
    """Counts, as episodes finish, answers the judge could not grade (``judge_error``) and episodes
    without a verdict (:data:`envs.protocol.ERROR_TERMINATIONS`), and raises :class:`TooManyErrors`
    as soon as the run's share of either is certain to end above its bound (``max_judge_error_rate``
    of ``total`` episodes; :data:`MAX_ERROR_SHARE`) while episodes remain, so a run with a broken judge
    stops early (after the last episode, :func:`check_errors` decides, with the summary printed).
    ``then(t)`` is called first for each episode."""

    def __init__(self, total: int, max_judge_error_rate: float, then: Callable[[Any], None] | None = None):
        self.total, self.max_judge_error_rate, self.then = total, max_judge_error_rate, then
        self.finished = self.judge_errors = self.errors = 0
        self.example = ""

    def __call__(self, traj: Any) -> None:
        from envs.protocol import ERROR_TERMINATIONS

        if self.then is not None:
            self.then(traj)
        self.finished += 1
        if self.finished >= self.total:  # the last episode: the run's own check reports, with the summary
            return
        if traj.termination == "judge_error":
            self.judge_errors += 1
            self.example = self.example or str(traj.info.get("judge_error", ""))[:200]
            if self.judge_errors > self.max_judge_error_rate * self.total:
                raise TooManyErrors(
                    f"the judge could not grade {self.judge_errors} of {self.total} answers (at most "
                    f"{self.max_judge_error_rate:.0%} may fail: --max-judge-error-rate), so the run stopped after "
                    f"{self.finished} episodes; first failure: {self.example}")
        elif traj.termination in ERROR_TERMINATIONS:
            self.errors += 1
            if self.errors > MAX_ERROR_SHARE * self.total:
                raise TooManyErrors(
                    f"{self.errors} of {self.total} episodes ended without a verdict ({traj.termination}: "
                    f"{str(traj.info.get('error', ''))[:200]}), so the run stopped after {self.finished} episodes: "
                    "check the policy endpoint")


def per_task_rows(trajectories: Sequence[Any], k: int) -> list[dict[str, Any]]:
    """One row per task from trajectories laid out group after group (``k`` per task).

    An answer the judge could not grade (``judge_error``) counts as wrong. Episodes without a
    verdict (:data:`envs.protocol.ERROR_TERMINATIONS`: the policy endpoint failed, the environment
    raised) are counted in ``errors`` and left out of ``correct``/``pass@1``/``pass@k``, which are
    ``None`` when too few scored samples remain."""
    from envs.protocol import ERROR_TERMINATIONS

    rows = []
    for start in range(0, len(trajectories), k):
        group = trajectories[start:start + k]
        task = group[0].task
        scored = [t for t in group if t.termination not in ERROR_TERMINATIONS]
        correct = sum(t.is_correct for t in scored)
        rows.append({
            "id": task["id"], "question": task["question"], "answer": task["answer"], "samples": len(group),
            "scored": len(scored), "errors": len(group) - len(scored), "correct": correct,
            "judge_errors": sum(t.termination == "judge_error" for t in group),
            "pass@1": correct / len(scored) if scored else None,
            f"pass@{k}": pass_at_k(len(scored), correct, k) if len(scored) >= k else None,
            "is_correct": [t.is_correct for t in group], "rewards": [t.reward for t in group],
            "predictions": [str(t.info.get("answer", "")) for t in group],
            "terminations": [t.termination for t in group], "num_tool_calls": [t.num_tool_calls for t in group],
            "num_turns": [t.num_turns for t in group],
        })
    return rows


def _mean(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(rows: list[dict], trajectories: Sequence[Any], config: EvalConfig, seconds: float) -> dict[str, Any]:
    """The run's summary: pass@1, pass@k (over the tasks with scored samples), means, termination
    counts, episodes without a verdict (``errors``: by kind; ``error_share``), answers the judge could not
    grade (``judge_errors``, ``judge_error_rate``: scored as wrong), settings."""
    from envs.protocol import ERROR_TERMINATIONS

    n = len(rows)
    episodes = len(trajectories)
    terminations = Counter(t.termination for t in trajectories)
    errors = {kind: terminations[kind] for kind in sorted(ERROR_TERMINATIONS) if terminations[kind]}
    return {
        "name": config.results_name, "policy": config.policy, "model": config.model, "tasks": config.tasks,
        "num_tasks": n, "k": config.k, "pass@1": _mean([r["pass@1"] for r in rows]),
        f"pass@{config.k}": _mean([r[f"pass@{config.k}"] for r in rows]),
        "scored_tasks": sum(r["pass@1"] is not None for r in rows),
        "errors": errors, "error_episodes": sum(errors.values()),
        "error_share": sum(errors.values()) / episodes if episodes else 0.0,
        "judge_errors": terminations["judge_error"],
        "judge_error_rate": terminations["judge_error"] / episodes if episodes else 0.0,
        "max_judge_error_rate": getattr(config, "max_judge_error_rate", MAX_JUDGE_ERROR_RATE),
        "mean_tool_calls": sum(t.num_tool_calls for t in trajectories) / episodes,
        "mean_turns": sum(t.num_turns for t in trajectories) / episodes,
        "terminations": dict(terminations),
        "temperature": config.temperature, "top_p": config.top_p, "judge": config.judge,
        "max_tool_calls": config.max_tool_calls, "max_context_tokens": config.max_context_tokens,
        "seconds": seconds,
    }


def play_baseline(name: str, tasks: Sequence[Mapping[str, Any]], rollout: Any, k: int,
                  on_trajectory: Callable[[Any], None] | None = None) -> list:
    """``k`` episodes per task of a baseline policy (:mod:`envs.baselines`), ``num_envs`` at once;
    ``on_trajectory`` as in :func:`evaluate`."""
    import envs  # noqa: F401  (registers the environments)
    from envs.baselines import make_agent
    from envs.episode import run_episode
    from envs.wrappers import EpisodeTimeLimit
    from trainers.rollout import Trajectory, make_env

    jobs: queue.Queue = queue.Queue()
    for i, task in enumerate(tasks):
        for j in range(k):
            jobs.put((i * k + j, dict(task)))
    results: dict[int, Trajectory] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()  # set by the first failure (``on_trajectory`` may stop the run): no new episodes

    def worker() -> None:
        env = None
        try:  # making the environment can fail too (a missing simulator, a bad id): reported like the rest
            env = make_env(rollout.env_id, dict(rollout.env_kwargs))
            if rollout.max_episode_seconds is not None:
                env = EpisodeTimeLimit(env, rollout.max_episode_seconds)
            while not stop.is_set():
                try:
                    index, task = jobs.get_nowait()
                except queue.Empty:
                    return
                agent = make_agent(name, seed=rollout.seed + index)
                episode = run_episode(env, agent, options={"task": task})
                results[index] = Trajectory.from_episode(episode, index, rollout.policy_name)
                if on_trajectory is not None:
                    with lock:
                        on_trajectory(results[index])
        except BaseException as exc:  # reported in the main thread
            stop.set()
            errors.append(exc)
        finally:
            if env is not None:
                env.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(rollout.num_envs, jobs.qsize()))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    missing = len(tasks) * k - len(results)
    if missing:  # never a silently short evaluation
        raise RuntimeError(f"{missing} of {len(tasks) * k} baseline episodes produced no result")
    return [results[i] for i in sorted(results)]


class JsonlWriter:
    """JSON lines written as they come into ``<path>.partial`` (flushed per line), renamed to ``path`` by
    :meth:`finish`: an interrupted run keeps what it finished, and nothing half-written has the final name.

    Text is UTF-8 except what UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"`` from a task
    file), which is written as its JSON escape: a bad string costs nothing but itself."""

    def __init__(self, path: Path):
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.count = 0
        # backslashreplace writes an unencodable character as \uXXXX: inside a JSON string, its escape.
        self.fh = self.partial.open("w", encoding="utf-8", errors="backslashreplace")

    def write(self, record: Mapping[str, Any]) -> None:
        self.fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.fh.flush()
        self.count += 1

    def finish(self) -> None:
        self.fh.close()
        os.replace(self.partial, self.path)

    def close(self) -> None:
        """Close without the final name (after a failure: ``<path>.partial`` keeps what was written;
        an empty one is removed)."""
        if not self.fh.closed:
            self.fh.close()
            if self.count == 0:
                self.partial.unlink(missing_ok=True)


def _write_jsonl(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    writer = JsonlWriter(path)
    try:
        for record in records:
            writer.write(record)
        writer.finish()
    finally:
        writer.close()


def _merge_summary(path: Path, name: str, summary: dict[str, Any]) -> None:
    existing: dict[str, Any] = {}
    if path.is_file():
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            existing = {}
    existing = existing if isinstance(existing, dict) else {}
    existing[name] = summary
    write_json_atomic(path, existing, indent=2, ensure_ascii=True, default=str)


def _fmt(value: float | None, width: int) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.3f}"


def print_table(summary: dict[str, Any]) -> None:
    k = summary["k"]
    print(f"{'name':<20} {'tasks':>6} {'k':>3} {'pass@1':>7} {f'pass@{k}':>7} {'tool calls':>10} {'turns':>6} "
          f"{'errors':>6}")
    print(f"{summary['name'][:20]:<20} {summary['num_tasks']:>6} {k:>3} {_fmt(summary['pass@1'], 7)} "
          f"{_fmt(summary[f'pass@{k}'], 7)} {summary['mean_tool_calls']:>10.2f} {summary['mean_turns']:>6.2f} "
          f"{summary.get('error_episodes', 0):>6}")
    print("terminations: " + ", ".join(f"{r}={c}" for r, c in sorted(summary["terminations"].items())))
    if summary.get("judge_errors"):
        print(f"answers the judge could not grade (scored as wrong): {summary['judge_errors']} "
              f"({summary['judge_error_rate']:.1%}; at most {summary['max_judge_error_rate']:.0%})")
    if summary.get("error_episodes"):
        kinds = ", ".join(f"{kind}={count}" for kind, count in summary["errors"].items())
        print(f"episodes without a verdict (left out of pass@k): {summary['error_episodes']} ({kinds})")


def check_errors(summary: dict[str, Any], where: str) -> None:
    """``UserError`` (a non-zero exit) when episodes without a verdict dominate the run, or when the
    judge failed on more than ``max_judge_error_rate`` of the answers."""
    rate, bound = summary.get("judge_error_rate") or 0.0, summary.get("max_judge_error_rate", MAX_JUDGE_ERROR_RATE)
    if rate > bound:
        raise UserError(f"the judge could not grade {summary['judge_errors']} of {summary['num_tasks'] * summary['k']} "
                        f"answers ({rate:.1%}, at most {bound:.0%} may fail): check the judge endpoint; the results "
                        f"in {where} score them as wrong")
    share = summary.get("error_share") or 0.0
    if share > MAX_ERROR_SHARE:
        kinds = ", ".join(f"{kind}={count}" for kind, count in summary["errors"].items())
        raise UserError(f"{summary['error_episodes']} of {summary['num_tasks'] * summary['k']} episodes ended "
                         f"without a verdict ({kinds}): check the judge and policy endpoints; results so far are "
                         f"in {where}, but their pass@k is not meaningful")


def run_eval(config: EvalConfig) -> dict[str, Any]:
    """Evaluate, write the results, print the table; returns the summary."""
    from envs.tasks import load_tasks
    from trainers.budget_sweep import run_sweep

    tasks = [t.to_dict() for t in load_tasks(config.tasks)][: config.limit]
    out = Path(config.out)
    name = config.results_name
    check_results_name(out, name, config.overwrite)
    policy = load_policy(config)
    out.mkdir(parents=True, exist_ok=True)
    # Trajectories go to disk as they finish (a crash or Ctrl-C keeps them in <name>.trajectories.jsonl.partial);
    # once all are in, the file is written again in task order under its final name.
    path = out / f"{name}.trajectories.jsonl"
    progress = JsonlWriter(path)
    try:
        rows, summary, trajectories = evaluate(policy, tasks, config,
                                               on_trajectory=lambda t: progress.write(t.to_record(timing=False)))
    except TooManyErrors as exc:
        raise TooManyErrors(f"{exc}; the finished episodes are in {progress.partial}") from None
    finally:
        progress.close()
    _write_jsonl(path, [t.to_record(timing=False) for t in trajectories])
    progress.partial.unlink(missing_ok=True)
    _write_jsonl(out / f"{name}.jsonl", rows)
    if config.sweep_tool_calls or config.sweep_context_tokens:
        def evaluate_at(budget_name: str, value: int) -> dict[str, Any]:
            return evaluate(policy, tasks, with_budget(config, **{budget_name: value}))[1]

        summary["budget_sweep"] = run_sweep(evaluate_at, config, out / f"{name}.budget_sweep")
    _merge_summary(out / "summary.json", name, summary)
    print_table(summary)
    print(f"per-task results: {out / f'{name}.jsonl'}")
    print(json.dumps(summary, default=str))
    check_errors(summary, str(out / f"{name}.jsonl"))
    return summary


def check_results_name(out: Path, name: str, overwrite: bool) -> None:
    """``UserError`` when ``out`` already holds results named ``name`` (its files or its entry in
    ``summary.json``) and ``overwrite`` is off: one run never replaces another's results silently."""
    if overwrite:
        return
    found = [p.name for p in (out / f"{name}.jsonl", out / f"{name}.trajectories.jsonl") if p.exists()]
    summary = out / "summary.json"
    if not found and summary.is_file():
        try:
            if name in json.loads(summary.read_text(encoding="utf-8")):
                found = [f"{summary.name}[{name!r}]"]
        except (ValueError, TypeError):
            pass
    if found:
        raise UserError(f"{out} already holds results named {name!r} ({found[0]}); pass --name NAME for new "
                        "results, or --overwrite to replace them")


def with_budget(config: EvalConfig, **budget: int) -> EvalConfig:
    """The config with another tool-call or context budget (validated again)."""
    return replace(config, **budget)
