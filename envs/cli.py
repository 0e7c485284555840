"""``websailor env ...``: run the baseline policies, derive simulator tasks.

Imports stay light here (the dispatcher imports this module to build its parser);
environments and simulators are imported inside the run functions.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from wiki_sim.common.errors import UserError


def _check_wiki_dir(wiki_dir: str) -> None:
    if not (Path(wiki_dir) / "build.json").is_file():
        raise UserError(f"{wiki_dir} is not a built simulator (no build.json); build one with `websailor wiki build`")


@dataclass
class BaselineConfig:
    """Play a baseline policy on every task of a file in the simulator environment
    (websailor/WikiSim-v0), print its success rate, and write the trajectories."""

    wiki_dir: str
    """The simulator directory (built by `websailor wiki build`)."""
    tasks: str
    """Task JSONL file ({"question", "answer"} per line; optional id, aliases)."""
    policy: Literal["heuristic", "random"] = "heuristic"
    """Which baseline to play."""
    limit: int | None = None
    """Play only the first N tasks."""
    out: str | None = None
    """Write the trajectories (JSONL) here."""
    seed: int = 0
    """Seed of the random policy."""
    max_tool_calls: int | None = None
    """Tool-call budget per episode (default: 100; with --compact, 2)."""
    tools: list[str] | None = None
    """Tools offered to the policy (names; default: search, visit, python; with --compact, its search and
    visit)."""
    compact: bool = False
    """The compact observations the main job trains and evaluates on (envs/compact.py: a short system prompt,
    the top 3 hits with 80-character snippets, 200 characters of a visit, 2 tool calls, a second malformed turn
    in a row ends the episode): trajectories written so are what `websailor sft train` needs for a small model."""

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if self.max_tool_calls is not None and self.max_tool_calls < 1:
            raise ValueError(f"--max-tool-calls must be >= 1, got {self.max_tool_calls}")
        from envs.tasks import check_task_file

        check_task_file(self.tasks)
        _check_wiki_dir(self.wiki_dir)


def baseline_env_kwargs(config: BaselineConfig) -> dict[str, Any]:
    """``gym.make("websailor/WikiSim-v0", **kwargs)`` as ``config`` says (with ``--compact``: the main job's
    compact setting, :class:`envs.compact.CompactConfig` with its defaults and ``max_tool_calls``)."""
    kwargs: dict[str, Any] = {"wiki_dir": config.wiki_dir}
    if config.compact:
        from envs.compact import CompactConfig

        kwargs["compact"] = CompactConfig(max_tool_calls=config.max_tool_calls or CompactConfig.max_tool_calls)
    else:
        kwargs["max_tool_calls"] = config.max_tool_calls or 100
        kwargs["tools"] = ["search", "visit", "python"]
    if config.tools is not None:
        kwargs["tools"] = list(config.tools)
    return kwargs


def run_baseline(config: BaselineConfig, agent_for_task: Callable[[dict[str, Any]], Any] | None = None) -> dict:
    """Play the episodes; returns the summary (also printed, last line as JSON). ``agent_for_task(task)``, when
    given, makes each episode's agent from its task (a policy that knows the answer: the gold agent of
    ``websailor env baseline --policy gold``)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)
    from envs.baselines import make_agent
    from envs.episode import run_episode
    from envs.trajectory import TrajectoryWriter

    env = gym.make("websailor/WikiSim-v0", tasks=config.tasks, **baseline_env_kwargs(config))
    tasks = env.unwrapped.tasks[: config.limit]
    policy = make_agent(config.policy, seed=config.seed) if agent_for_task is None else None
    name = policy.name if policy is not None else config.policy
    writer = TrajectoryWriter(config.out) if config.out else None
    correct, tool_calls, terminations = 0, 0, Counter()
    start = time.perf_counter()
    try:
        for index in range(len(tasks)):
            if agent_for_task is not None:
                policy = agent_for_task(tasks[index].to_dict())
            episode = run_episode(env, policy, options={"task_index": index})
            info = episode.info
            correct += bool(info["is_correct"])
            tool_calls += info["num_tool_calls"]
            terminations[info["termination"]] += 1
            if writer:
                writer.write(episode.record(name))
    except BaseException:
        if writer:
            writer.abandon()  # what finished stays in the .partial file
        raise
    finally:
        env.close()
    if writer:
        writer.close()
    elapsed = time.perf_counter() - start
    summary = {
        "policy": name, "tasks": config.tasks, "episodes": len(tasks), "correct": correct,
        "success_rate": correct / len(tasks), "mean_tool_calls": tool_calls / len(tasks),
        "terminations": dict(terminations), "episodes_per_s": len(tasks) / elapsed if elapsed else 0.0,
    }
    print(f"{'policy':<10} {'episodes':>8} {'correct':>8} {'success':>8} {'tool calls':>10} {'ep/s':>7}")
    print(f"{name:<10} {len(tasks):>8} {correct:>8} {summary['success_rate']:>8.3f} "
          f"{summary['mean_tool_calls']:>10.2f} {summary['episodes_per_s']:>7.1f}")
    print("terminations: " + ", ".join(f"{k}={v}" for k, v in sorted(terminations.items())))
    if writer:
        print(f"trajectories: {config.out}")
    print(json.dumps(summary))
    return summary


@dataclass
class DeriveTasksConfig:
    """Derive title-lookup tasks from a built simulator (answerable offline), as task JSONL."""

    wiki_dir: str
    """The simulator directory (built by `websailor wiki build`)."""
    out: str
    """Output task JSONL file."""
    n: int = 200
    """How many tasks (fewer if the simulator has fewer candidates)."""
    kind: Literal["description", "lead", "mixed"] = "mixed"
    """Question kind: unique short description, masked first sentence, or both alternating."""
    seed: int = 0
    """Sampling seed."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"--n must be >= 1, got {self.n}")
        _check_wiki_dir(self.wiki_dir)


def run_derive_tasks(config: DeriveTasksConfig) -> int:
    from envs.derived_tasks import derive_tasks
    from envs.tasks import write_jsonl_tasks

    tasks = derive_tasks(config.wiki_dir, config.n, seed=config.seed, kind=config.kind)
    count = write_jsonl_tasks(config.out, tasks)
    kinds = Counter(t.metadata["kind"] for t in tasks)
    print(f"wrote {count} tasks to {config.out} ({', '.join(f'{k}: {v}' for k, v in sorted(kinds.items()))})")
    return 0
