"""Asynchronous rollouts against lockstep ones, when some tool calls are slow.

``trainers.rollout.collect`` with ``schedule="async"`` (generate for whichever episodes are
ready; finished ones are replaced at once) against ``schedule="lockstep"`` (every running
step finishes before the next generation, as a synchronous vector environment steps; the
best-configured lockstep: the same thread pool runs all tool calls in parallel and
finished episodes are replaced at once, like Gymnasium's autoreset).

The work is identical in both: a scripted token policy (search, visit, answer) whose
``generate`` costs ``--gen-fixed-ms`` per call plus ``--gen-per-prompt-ms`` per prompt
(a GPU's batched decoding: a fixed cost dominates), and tools whose latency is drawn from
a heavy tail that is a pure function of the call (median ~``--tool-median-ms``, a
``--slow-fraction`` of calls ``--slow-ms``), so both schedules meet the same slow calls.
Reports episodes per second, the ratio, and the mean generation batch size, in two
scenarios: the heavy tail, and no slow calls at all (where async loses: it generates in
smaller batches, and each ``generate`` call pays the fixed cost).

Usage: ``python -m benchmarks.rollout_async [--episodes 96] [--num-envs 16]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from typing import Any

import gymnasium as gym
from transformers import ByT5Tokenizer

from envs.env import ResearchEnv
from envs.protocol import format_turn
from envs.tools.base import ToolResult
from trainers.policies import Generation
from trainers.rollout import RolloutConfig, collect

ENV_ID = "bench/SlowTools-v0"


def _unit(key: str) -> float:
    """A number in [0, 1) that depends only on ``key``."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2 ** 64


class SlowTool:
    """A tool whose latency is a pure function of its arguments (heavy-tailed)."""

    description = "Returns a fixed text after a while."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def __init__(self, name: str, median_s: float, slow_fraction: float, slow_s: float):
        self.name, self.median_s, self.slow_fraction, self.slow_s = name, median_s, slow_fraction, slow_s

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        u = _unit(f"{self.name}:{arguments.get('query', '')}")
        delay = self.slow_s if u < self.slow_fraction else self.median_s * (0.5 + u)
        time.sleep(delay)
        return ToolResult(f"result of {self.name} after {delay * 1000:.0f} ms")


def make_env(tasks: list[dict], median_s: float, slow_fraction: float, slow_s: float) -> ResearchEnv:
    tools = [SlowTool(n, median_s, slow_fraction, slow_s) for n in ("search", "visit")]
    return ResearchEnv(tools, tasks, system_prompt="Answer with tools.", current_date="2025-07-18")


class ScriptedTimedPolicy:
    """Plays search -> visit -> answer as byte ids; each generate call sleeps like a batched GPU step."""

    def __init__(self, fixed_s: float, per_prompt_s: float):
        self.tokenizer = ByT5Tokenizer()
        self.fixed_s, self.per_prompt_s = fixed_s, per_prompt_s
        self.batches: list[int] = []

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, stop_ids=()):
        time.sleep(self.fixed_s + self.per_prompt_s * len(prompts))
        self.batches.append(len(prompts))
        out = []
        for p in prompts:
            text = self.tokenizer.decode(p)
            question = text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
            turn = text.count("<|im_start|>assistant\n") - 1
            if turn == 0:
                body = format_turn("s", tool_call=("search", {"query": f"{question}:0"}))
            elif turn == 1:
                body = format_turn("v", tool_call=("visit", {"query": f"{question}:1"}))
            else:
                body = format_turn("a", answer=question.split()[-1])
            ids = self.tokenizer.encode(body + "<|im_end|>", add_special_tokens=False)
            out.append(Generation(ids, [0.0] * len(ids), body, "stop"))
        return out


def run(schedule: str, env_id: str, tasks: list[dict], args: argparse.Namespace) -> dict[str, Any]:
    policy = ScriptedTimedPolicy(args.gen_fixed_ms / 1000, args.gen_per_prompt_ms / 1000)
    config = RolloutConfig(env_id=env_id, env_kwargs={"tasks": tasks}, num_envs=args.num_envs,
                           tool_workers=args.num_envs, schedule=schedule, max_episode_seconds=None)
    start = time.perf_counter()
    trajs = collect(policy, tasks, config, progress=False)
    seconds = time.perf_counter() - start
    correct = sum(t.is_correct for t in trajs)
    if correct != len(tasks):
        raise RuntimeError(f"{schedule}: {correct} of {len(tasks)} episodes correct; the benchmark is broken")
    return {"schedule": schedule, "episodes": len(trajs), "seconds": seconds, "episodes_per_s": len(trajs) / seconds,
            "mean_batch": sum(policy.batches) / len(policy.batches), "generate_calls": len(policy.batches)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=96)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--gen-fixed-ms", type=float, default=40.0)
    parser.add_argument("--gen-per-prompt-ms", type=float, default=1.0)
    parser.add_argument("--tool-median-ms", type=float, default=40.0)
    parser.add_argument("--slow-fraction", type=float, default=0.05)
    parser.add_argument("--slow-ms", type=float, default=1500.0)
    args = parser.parse_args(argv)
    tasks = [{"id": f"t{i}", "question": f"Question number {i} answer{i}", "answer": f"answer{i}"}
             for i in range(args.episodes)]
    scenarios = {"heavy_tail": args.slow_fraction, "no_slow_calls": 0.0}
    results: dict[str, Any] = {"benchmark": "rollout_async", "episodes": args.episodes, "num_envs": args.num_envs,
                               "slow_ms": args.slow_ms}
    print(f"{'scenario':<14} {'schedule':<10} {'episodes':>8} {'seconds':>8} {'episodes/s':>11} {'mean batch':>11} "
          f"{'generate calls':>15}")
    for scenario, fraction in scenarios.items():
        env_id = f"{ENV_ID}-{scenario}"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=make_env,
                         kwargs={"median_s": args.tool_median_ms / 1000, "slow_fraction": fraction,
                                 "slow_s": args.slow_ms / 1000})
        lock, asyn = run("lockstep", env_id, tasks, args), run("async", env_id, tasks, args)
        for r in (lock, asyn):
            print(f"{scenario:<14} {r['schedule']:<10} {r['episodes']:>8} {r['seconds']:>8.2f} "
                  f"{r['episodes_per_s']:>11.2f} {r['mean_batch']:>11.2f} {r['generate_calls']:>15}")
        results[scenario] = {
            "slow_fraction": fraction, "lockstep_episodes_per_s": round(lock["episodes_per_s"], 3),
            "async_episodes_per_s": round(asyn["episodes_per_s"], 3),
            "async_over_lockstep": round(asyn["episodes_per_s"] / lock["episodes_per_s"], 3),
            "lockstep_mean_batch": round(lock["mean_batch"], 2), "async_mean_batch": round(asyn["mean_batch"], 2)}
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
