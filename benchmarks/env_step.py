"""The research environment's own cost, and episodes per second with the scripted agent.

1. Overhead per step, tool time excluded: ``ResearchEnv.step`` wall time minus the tool's
   own time (``info["tool_latency_s"]``), over a mix of turns (strict tool calls, lenient
   tool calls, malformed turns, answers), with trivial in-memory tools, on transcripts
   growing to 100 tool calls. Target: median < 1 ms.
2. Episodes per second of the heuristic agent over a task file on the simulator
   (``websailor/WikiSim-v0``), side by side in one run: one environment played
   sequentially, a ``SyncVectorEnv`` and an ``AsyncVectorEnv`` of ``--num-envs``. Every
   mode plays each of ``--episodes`` tasks once (each sub-environment a shard of them), on
   fresh simulators (their in-process caches start empty); a warm-up pass first fills
   the operating system's file cache, so no mode pays for a cold disk.

Usage: ``python -m benchmarks.env_step [--wiki-dir data/wiki] [--tasks FILE] [--episodes 120]``.
Without ``--tasks``, title-lookup tasks are derived from the simulator. Prints a table,
then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the environments)
import envs.tasks
from envs.baselines import HeuristicAgent
from envs.episode import run_episode
from envs.env import ResearchEnv
from envs.protocol import format_turn
from envs.tools.base import ToolResult

SEARCH_TEXT = "\n\n".join(f"{i}. [Title {i}](https://en.wikipedia.org/wiki/Title_{i})\nA snippet of about one "
                          "hundred characters that stands in for a search result's text here." for i in range(1, 11))


class _FixedSearch:
    """A trivial tool: the same ten-hit result every time (no search cost)."""

    name = "search"
    description = "Returns fixed results."
    parameters = {"type": "object", "properties": {"query": {"type": "array", "items": {"type": "string"}}},
                  "required": ["query"]}

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(SEARCH_TEXT)


def measure_overhead(steps: int) -> dict[str, float]:
    """Median and 90th percentile of step time minus tool time, in milliseconds, per turn kind."""
    env = ResearchEnv([_FixedSearch()], [{"question": f"Question {i}?", "answer": "x"} for i in range(50)],
                      current_date="2025-01-01", max_tool_calls=100)
    turns = {
        "tool_call": format_turn("I should search for this.", tool_call=("search", {"query": ["a b", "c d"]})),
        "lenient_call": "<think>x</think><tool_call>{'name': 'search', 'arguments': {'query': ['a',],},}",
        "malformed": "I am not sure what to do next.",
        "answer": format_turn("Done.", answer="x"),
    }
    cycle = ["tool_call"] * 6 + ["lenient_call", "malformed"] + ["tool_call"] * 4 + ["answer"]
    times: dict[str, list[float]] = {k: [] for k in turns}
    env.reset(seed=0)
    for i in range(steps):
        kind = cycle[i % len(cycle)]
        start = time.perf_counter()
        _, _, terminated, truncated, info = env.step(turns[kind])
        elapsed = time.perf_counter() - start - info["tool_latency_s"]
        times[kind].append(elapsed * 1e3)
        if terminated or truncated:
            env.reset()
    every = [t for ts in times.values() for t in ts]
    out = {f"{k}_median_ms": statistics.median(v) for k, v in times.items()}
    out["median_ms"] = statistics.median(every)
    out["p90_ms"] = float(np.percentile(every, 90))
    return out


def _trivial_env() -> ResearchEnv:
    return ResearchEnv([_FixedSearch()], [{"question": "q", "answer": "x"}], current_date="2025-01-01",
                       max_tool_calls=10**6)


def measure_vector_overhead(num_envs: int, steps: int = 300) -> dict[str, float]:
    """Milliseconds per vector step with the trivial tool: what batching itself costs."""
    action = format_turn("t", tool_call=("search", {"query": ["a"]}))
    out = {}
    for name, make in [("sync", lambda fns: gym.vector.SyncVectorEnv(fns)),
                       ("async", lambda fns: gym.vector.AsyncVectorEnv(fns)),
                       ("async_no_shm", lambda fns: gym.vector.AsyncVectorEnv(fns, shared_memory=False))]:
        vec = make([_trivial_env] * num_envs)
        vec.reset(seed=list(range(num_envs)))
        start = time.perf_counter()
        for _ in range(steps):
            vec.step((action,) * num_envs)
        out[name] = (time.perf_counter() - start) / steps * 1e3
        vec.close()
    return out


class _InOrder(gym.Wrapper):
    """Resets to the given task indices in turn (cycling), so every mode plays each task once."""

    def __init__(self, env: gym.Env, indices: list[int]):
        super().__init__(env)
        self._indices, self._next = indices, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        index = self._indices[self._next % len(self._indices)]
        self._next += 1
        return self.env.reset(seed=seed, options={"task_index": index})


def _make(wiki_dir: str, tasks: str, shard: int = 0, shards: int = 1, n_tasks: int = 1):
    def make() -> gym.Env:
        env = gym.make("websailor/WikiSim-v0", wiki_dir=wiki_dir, tasks=tasks, tools=["search", "visit"])
        return _InOrder(env, list(range(shard, n_tasks, shards)))

    return make


def episodes_sequential(wiki_dir: str, tasks: str, episodes: int) -> tuple[float, float]:
    """(episodes per second, success rate) of one environment played in a loop."""
    env = _make(wiki_dir, tasks, n_tasks=episodes)()
    correct = 0
    start = time.perf_counter()
    for _ in range(episodes):
        correct += bool(run_episode(env, HeuristicAgent()).info["is_correct"])
    elapsed = time.perf_counter() - start
    env.close()
    return episodes / elapsed, correct / episodes


def episodes_vector(wiki_dir: str, tasks: str, episodes: int, num_envs: int, mode: str) -> tuple[float, float]:
    """(episodes per second, success rate) of a vector environment, one agent per sub-environment;
    sub-environment i plays tasks i, i + num_envs, ..."""
    fns = [_make(wiki_dir, tasks, i, num_envs, episodes) for i in range(num_envs)]
    envs_ = gym.vector.SyncVectorEnv(fns) if mode == "sync" else gym.vector.AsyncVectorEnv(fns)
    agents = [HeuristicAgent() for _ in range(num_envs)]
    start = time.perf_counter()
    obs, _ = envs_.reset(seed=list(range(num_envs)))
    for i, agent in enumerate(agents):
        agent.reset(obs[i], {})
    finished, correct = 0, 0
    restarting = np.zeros(num_envs, dtype=bool)
    while finished < episodes:
        actions = tuple(agents[i].act(obs[i], {}) for i in range(num_envs))
        obs, _, terminated, truncated, info = envs_.step(actions)
        for i in range(num_envs):
            if restarting[i]:  # next-step autoreset: obs[i] is a new first prompt
                agents[i].reset(obs[i], {})
            elif terminated[i] or truncated[i]:
                finished += 1
                correct += bool(info["is_correct"][i])
        restarting = terminated | truncated
    elapsed = time.perf_counter() - start
    envs_.close()
    return finished / elapsed, correct / finished


def measure_episodes(wiki_dir: str, tasks: str, episodes: int, num_envs: int,
                     rounds: int) -> dict[str, tuple[float, float]]:
    """Mode -> (median episodes per second over ``rounds``, success rate); the modes take
    turns within each round, so a change in the machine's load hits them alike."""
    runs: dict[str, list[tuple[float, float]]] = {"sequential": [], "sync": [], "async": []}
    episodes_sequential(wiki_dir, tasks, min(episodes, 20))  # warm-up, not measured
    for _ in range(rounds):
        runs["sequential"].append(episodes_sequential(wiki_dir, tasks, episodes))
        for mode in ("sync", "async"):
            runs[mode].append(episodes_vector(wiki_dir, tasks, episodes, num_envs, mode))
    return {mode: (statistics.median(e for e, _ in r), r[0][1]) for mode, r in runs.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki-dir", default="data/wiki", help="built simulator directory")
    parser.add_argument("--tasks", default=None, help="task JSONL (default: derived from the simulator)")
    parser.add_argument("--episodes", type=int, default=120, help="episodes per configuration and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the median is reported)")
    parser.add_argument("--num-envs", type=int, default=min(4, os.cpu_count() or 1),
                        help="sub-environments of the vector environments (default: CPU cores, at most 4)")
    parser.add_argument("--steps", type=int, default=5000, help="steps for the overhead measurement")
    args = parser.parse_args(argv)
    if not (Path(args.wiki_dir) / "build.json").is_file():
        raise SystemExit(f"error: {args.wiki_dir} is not a built simulator; run `bash setup_wiki.sh` first")

    overhead = measure_overhead(args.steps)
    vector_overhead = measure_vector_overhead(args.num_envs)
    with tempfile.TemporaryDirectory() as tmp:
        tasks = args.tasks
        if tasks is None:
            from envs.derived_tasks import derive_tasks
            from envs.tasks import write_jsonl_tasks

            tasks = str(Path(tmp) / "tasks.jsonl")
            write_jsonl_tasks(tasks, derive_tasks(args.wiki_dir, args.episodes, seed=0))
        if args.episodes > len(envs.tasks.load_tasks(tasks)):
            raise SystemExit(f"error: --episodes {args.episodes} is more than the {tasks} tasks")
        modes = measure_episodes(args.wiki_dir, tasks, args.episodes, args.num_envs, args.rounds)

    print(f"env overhead per step (tool time excluded, {args.steps} steps)")
    for key in ("tool_call", "lenient_call", "malformed", "answer"):
        print(f"  {key:<14} median {overhead[key + '_median_ms']:.3f} ms")
    print(f"  {'all':<14} median {overhead['median_ms']:.3f} ms   p90 {overhead['p90_ms']:.3f} ms")
    print(f"vector step with the trivial tool, {args.num_envs} sub-environments: " + ", ".join(
        f"{k} {v:.2f} ms" for k, v in vector_overhead.items()))
    print(f"\nheuristic agent on {tasks if args.tasks else 'derived simulator tasks'}: {args.episodes} episodes "
          f"per mode and round, median of {args.rounds} rounds")
    print(f"  {'mode':<22} {'episodes/s':>10} {'vs sequential':>14} {'success':>8}")
    seq_eps = modes["sequential"][0]
    names = {"sequential": "sequential", "sync": f"SyncVectorEnv x{args.num_envs}",
             "async": f"AsyncVectorEnv x{args.num_envs}"}
    for mode, (eps, acc) in modes.items():
        print(f"  {names[mode]:<22} {eps:>10.1f} {eps / seq_eps:>13.2f}x {acc:>8.3f}")
    result = {
        "benchmark": "env_step", "overhead_median_ms": round(overhead["median_ms"], 4),
        "overhead_p90_ms": round(overhead["p90_ms"], 4), "episodes": args.episodes, "rounds": args.rounds,
        "num_envs": args.num_envs, "sequential_eps": round(seq_eps, 2),
        "sync_vector_eps": round(modes["sync"][0], 2), "async_vector_eps": round(modes["async"][0], 2),
        "sync_vs_sequential": round(modes["sync"][0] / seq_eps, 3),
        "async_vs_sequential": round(modes["async"][0] / seq_eps, 3),
        "heuristic_success": round(modes["sequential"][1], 3), "cpu_count": os.cpu_count(),
        "vector_step_ms": {k: round(v, 3) for k, v in vector_overhead.items()},
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
