"""Overhead of the sandboxed ``python`` tool against a plain interpreter, in one run.

    python -m benchmarks.sandbox [--runs 40] [--callers 8] [--per-caller 10] [--rounds 3]

1. Latency of one ``print(1)``: the tool (bubblewrap, prlimit, the interpreter, output
   capture) against ``subprocess.run([python, "-c", "print(1)"])`` with the same
   interpreter (started in a new session too, as the sandbox is: with scheduler autogroups
   that alone changes CPU shares), interleaved so both see the same machine load; medians,
   ratio, added ms.
2. Throughput with N concurrent callers (threads), tool against plain subprocess, in
   alternated rounds (median).
3. The whole-execution memory cap: a fork bomb of allocators (6 children of 150 MiB, each
   within the 256 MiB per-process limit) plus 40 MiB in /tmp and 40 MiB in /dev/shm, under
   ``memory_mb=256``: peak memory of the execution and whether it was stopped, for the
   kernel-enforced cgroup (when this machine allows one), the polling supervisor, and the
   baseline the sandbox had before, per-process RLIMIT_AS only (its peak measured by the
   supervisor with no cap).

Prints a table, then one line of JSON last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from envs.sandbox import Sandbox, SandboxConfig
from envs.sandbox import memory as sandbox_memory
from envs.sandbox import runner as sandbox_runner
from envs.tools.python import PythonTool
from websailor.config_cli import add_dataclass_arguments, config_from_args


@dataclass
class BenchConfig:
    runs: int = 40
    """Executions of print(1) per side for the latency comparison."""
    callers: int = 8
    """Concurrent callers (threads) for the throughput comparison."""
    per_caller: int = 10
    """Executions per caller in one throughput round."""
    rounds: int = 3
    """Throughput rounds per side, alternated; the median is reported."""
    python: str = "/usr/bin/python3"
    """Interpreter used on both sides."""

    def __post_init__(self) -> None:
        for name in ("runs", "callers", "per_caller", "rounds"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"BenchConfig.{name}: expected an integer >= 1, got {value!r}")


def _plain(python: str) -> float:
    start = time.perf_counter()
    # A new session, like the sandbox's: with scheduler autogroups each session gets its own
    # CPU share, so on a loaded machine a new session alone changes the timings.
    out = subprocess.run([python, "-c", "print(1)"], capture_output=True, check=True, start_new_session=True).stdout
    elapsed = time.perf_counter() - start
    assert out == b"1\n", out
    return elapsed


def _tool(tool: PythonTool) -> float:
    start = time.perf_counter()
    result = tool({"code": "print(1)"})
    elapsed = time.perf_counter() - start
    assert result.ok and result.text == "stdout:\n1\n[exit status: 0]", result.text
    return elapsed


def _throughput(fn, callers: int, per_caller: int) -> float:
    def caller(_: int) -> None:
        for _ in range(per_caller):
            fn()

    start = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(caller, range(callers)))
    return callers * per_caller / (time.perf_counter() - start)


BOMB = """
import os, time
for path in ("/tmp/a", "/dev/shm/b"):
    with open(path, "wb") as f:
        for _ in range(40):
            f.write(b"x" * (1 << 20))
children = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        hog = bytearray(150 << 20)
        time.sleep(1.5)
        os._exit(0)
    children.append(pid)
print("exits", [os.waitpid(pid, 0)[1] for pid in children])
"""
BOMB_CAP_MB = 256


def _bomb(mode: str, python: str) -> dict:
    cfg = SandboxConfig(python=python, memory_mb=BOMB_CAP_MB, tmpfs_mb=64, file_size_mb=64, wall_seconds=20,
                        memory_limit="poll" if mode == "per-process" else mode)
    if mode == "per-process":  # the supervisor as a meter only: nothing enforces the sum
        original = sandbox_runner.make_guard
        sandbox_runner.make_guard = lambda c: sandbox_memory.PollGuard(1 << 62, c.tmpfs_mb << 20)
    try:
        start = time.perf_counter()
        result = Sandbox(cfg).run(BOMB)
        elapsed = time.perf_counter() - start
    finally:
        if mode == "per-process":
            sandbox_runner.make_guard = original
    peak = result.peak_memory_bytes or 0
    return {"mode": mode, "peak_mib": round(peak / (1 << 20), 1), "cap_mib": BOMB_CAP_MB,
            "over_cap_mib": round(max(0, peak / (1 << 20) - BOMB_CAP_MB), 1),
            "stopped": bool(result.memory_exceeded), "seconds": round(elapsed, 2), "status": result.status}


def memory_cap(python: str) -> list[dict]:
    modes = ["per-process", "poll"]
    if sandbox_memory.cgroup_support()[0] is not None:
        modes.append("cgroup")
    return [_bomb(mode, python) for mode in modes]


def run(cfg: BenchConfig) -> dict:
    tool = PythonTool(SandboxConfig(python=cfg.python))
    tool.check_available()
    for _ in range(3):  # warm the page cache and the probe
        _plain(cfg.python)
        _tool(tool)
    plain, sandboxed = [], []
    for _ in range(cfg.runs):
        plain.append(_plain(cfg.python))
        sandboxed.append(_tool(tool))
    plain_ms = statistics.median(plain) * 1000
    tool_ms = statistics.median(sandboxed) * 1000
    plain_rounds, tool_rounds = [], []
    for _ in range(cfg.rounds):  # alternated, so that both sides see the same load
        plain_rounds.append(_throughput(lambda: _plain(cfg.python), cfg.callers, cfg.per_caller))
        tool_rounds.append(_throughput(lambda: _tool(tool), cfg.callers, cfg.per_caller))
    plain_eps, tool_eps = statistics.median(plain_rounds), statistics.median(tool_rounds)
    return {
        "benchmark": "sandbox",
        "runs": cfg.runs,
        "plain_median_ms": round(plain_ms, 2),
        "tool_median_ms": round(tool_ms, 2),
        "ratio": round(tool_ms / plain_ms, 3),
        "added_ms": round(tool_ms - plain_ms, 2),
        "target_added_ms": 150,
        "callers": cfg.callers,
        "rounds": cfg.rounds,
        "plain_exec_per_s": round(plain_eps, 2),
        "tool_exec_per_s": round(tool_eps, 2),
        "throughput_ratio": round(tool_eps / plain_eps, 3),
        "python": cfg.python,
        "memory_cap": memory_cap(cfg.python),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sandbox", description=__doc__.split("\n")[0])
    add_dataclass_arguments(parser, BenchConfig)
    cfg = config_from_args(BenchConfig, parser.parse_args(argv))
    out = run(cfg)
    rows = [
        ("print(1), median of %d" % cfg.runs, f"{out['plain_median_ms']:.1f} ms", f"{out['tool_median_ms']:.1f} ms",
         f"x{out['ratio']:.2f}, +{out['added_ms']:.1f} ms (target < 150 ms)"),
        (f"executions/s, {cfg.callers} callers", f"{out['plain_exec_per_s']:.1f}", f"{out['tool_exec_per_s']:.1f}",
         f"x{out['throughput_ratio']:.2f}"),
    ]
    header = ("measure", "plain python -c", "python tool (bwrap)", "tool vs plain")
    _table(header, rows)
    print()
    _table(("fork bomb of allocators + tmpfs files", "peak MiB", "cap MiB", "over cap MiB", "stopped", "seconds"),
           [(m["mode"], m["peak_mib"], m["cap_mib"], m["over_cap_mib"], m["stopped"], m["seconds"])
            for m in out["memory_cap"]])
    print(json.dumps(out))
    sys.stdout.flush()


def _table(header: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
