"""Memory of 4 async sub-environments against one, at equal work, this code beside another tree's.

``gym.make("websailor/WikiSim-v0")`` played by the scripted heuristic agent (``benchmarks.
_scale_systems env``: 1 environment, then an ``AsyncVectorEnv`` of ``--num-envs``) until
``--steps`` sub-environment steps in all (the caches grow with the work, so the two are compared
at the same number of steps, not the same seconds); peak PSS of the process tree polled from /proc
(a page shared by n processes counts 1/n each). With ``--code DIR`` the same runs use another
checkout's ``wiki_sim`` and ``envs`` (this tree's driver), interleaved with this tree's.
Target (issue 23): ``--num-envs`` 4 in <= 2x the memory of one.

    python -m benchmarks.vector_memory --wiki-dir data/wiki [--tasks T.jsonl] [--steps 4000] [--code ../main]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.scale import MB, Monitor

REPO = Path(__file__).resolve().parents[1]


def run(code: Path, wiki: str, tasks: str, num_envs: int, steps: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), OMP_NUM_THREADS="1")
    cmd = [sys.executable, str(REPO / "benchmarks" / "_scale_systems.py"), "env", wiki, tasks, str(num_envs), "3600",
           str(steps)]
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mon = Monitor(proc.pid)
    out, err = proc.communicate()
    mon.stop()
    if proc.returncode != 0:
        raise SystemExit(f"env run failed ({proc.returncode}) with {code}: {err[-2000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    return {"steps": result["steps"], "steps_per_s": result["steps_per_s"], "create_s": result["create_s"],
            "peak_pss_mb": round(mon.peak_pss / MB, 1), "peak_rss_mb": round(mon.peak_rss / MB, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki-dir", default="data/wiki", help="a built simulator")
    parser.add_argument("--tasks", default=None, help="task JSONL (default: tasks derived from the simulator's pages)")
    parser.add_argument("--steps", type=int, default=4000, help="sub-environment steps per run, all together")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--code", default=None, help="another checkout to measure beside this one")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.num_envs < 2:
        raise SystemExit(f"--steps must be >= 1 and --num-envs >= 2, got {args.steps} and {args.num_envs}")
    if not (Path(args.wiki_dir) / "build.json").is_file():
        raise SystemExit(f"no simulator at {args.wiki_dir}: build one with `websailor wiki build` or bash setup_wiki.sh")
    trees = {"this": REPO} | ({"code": Path(args.code).resolve()} if args.code else {})
    with tempfile.TemporaryDirectory(prefix="vector-memory-") as tmp:
        tasks = args.tasks
        if tasks is None:
            from envs.derived_tasks import derive_tasks
            from envs.tasks import write_jsonl_tasks

            tasks = str(Path(tmp) / "tasks.jsonl")
            write_jsonl_tasks(tasks, derive_tasks(args.wiki_dir, 2000, seed=0))
        results: dict[str, dict[str, dict]] = {name: {} for name in trees}
        for n in (1, args.num_envs):
            for name, code in trees.items():  # interleaved: the trees see the same load
                results[name][str(n)] = run(code, str(Path(args.wiki_dir).resolve()), tasks, n, args.steps)
                print(f"  {name} {n} env(s): {results[name][str(n)]}", file=sys.stderr, flush=True)
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"{args.steps} steps of the heuristic agent on {args.wiki_dir}; load average {load}")
    print(f"{'code':<8}{'1 env MB':>10}{f'{args.num_envs} envs MB':>12}{'ratio':>8}{'steps/s 1':>11}"
          f"{f'steps/s {args.num_envs}':>11}")
    ratios = {}
    for name, r in results.items():
        one, many = r["1"], r[str(args.num_envs)]
        ratios[name] = round(many["peak_pss_mb"] / one["peak_pss_mb"], 3)
        print(f"{name:<8}{one['peak_pss_mb']:>10.1f}{many['peak_pss_mb']:>12.1f}{ratios[name]:>8.2f}"
              f"{one['steps_per_s']:>11.1f}{many['steps_per_s']:>11.1f}")
    met = ratios["this"] <= 2.0
    print(f"target: {args.num_envs} async sub-environments <= 2x the memory of one: {'met' if met else 'MISSED'}")
    print(json.dumps({"benchmark": "vector_memory", "wiki_dir": args.wiki_dir, "steps": args.steps,
                      "num_envs": args.num_envs, "code": args.code, "results": results, "ratios": ratios,
                      "load_average": load, "targets": {"async_memory_le_2x_one": met}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
