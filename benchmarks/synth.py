"""Synthesis throughput: verified SailorFog-QA-V2 tasks per minute with the template writer.

On a built simulator (the embedded default corpus by default), side by side in one run
over the same attempts (subgraph, target) of one seed:

- **full, N workers**: what ``websailor synth`` runs (clues, uncertainty, uniqueness
  against the whole corpus, template question, oracle episode, heuristic-agent episode);
- **full, 1 worker**: the same in one process (and the check that both give the same records);
- **without the heuristic agent**: what the difficulty label costs;
- **stage times** in one process: clue building + uncertainty + uniqueness, oracle, heuristic.

One-time setup (entity graph, subgraph sampling, corpus index) is timed apart and also
folded into an end-to-end rate for the requested number of tasks. Target (issue 8):
>= 100 verified tasks per minute on 2 cores. Usage:
``python -m benchmarks.synth [--wiki DIR] [--attempts N] [--workers 2]``; prints a table,
then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from typing import Any

TARGET_PER_MIN = 100.0


def setup(wiki: str, seed: int, attempts: int, graph_nodes: int,
          corpus_index: str = "disk") -> tuple[Any, list, dict[str, float]]:
    from sailorfog.corpus_index import open_corpus_index
    from sailorfog.graph import GraphConfig, build_graph
    from sailorfog.orbits import choose_target
    from sailorfog.parallel import Shared
    from sailorfog.sampling import sample_subgraphs
    from sailorfog.synth import attempt_rng
    from sailorfog.writers import TemplateWriter
    from wiki_sim import WikiSim

    times = {}
    with WikiSim(wiki) as sim:
        t = time.perf_counter()
        G = build_graph(sim, GraphConfig(max_nodes=graph_nodes, seed=seed))
        times["graph_s"] = time.perf_counter() - t
        t = time.perf_counter()
        subgraphs = sample_subgraphs(G, attempts, seed=seed)
        times["sampling_s"] = time.perf_counter() - t
        t = time.perf_counter()
        if corpus_index == "memory":  # the in-memory index built per run (before sailorfog.corpus_index)
            from sailorfog.corpus import index_from_sim

            index = index_from_sim(sim)
        else:
            index = open_corpus_index(sim)
        times["index_s"] = time.perf_counter() - t
        aliases = {n: sim.aliases(n) for s in subgraphs for n in s.nodes}
    shared = Shared(G, index, TemplateWriter(), seed, aliases, True, wiki, "2025-09-01")
    counts: Counter = Counter()
    jobs = [(i, s, *choose_target(s, G, counts, attempt_rng(seed, i))) for i, s in enumerate(subgraphs)]
    return shared, jobs, times


def run(shared: Any, jobs: list, workers: int) -> tuple[list, float]:
    from sailorfog.parallel import run_attempts

    t = time.perf_counter()
    outcomes = list(run_attempts(shared, jobs, workers))
    return outcomes, time.perf_counter() - t


def stage_times(shared: Any, jobs: list) -> dict[str, float]:
    """Seconds per attempt in each stage, in one process (the stages of Synthesizer.attempt)."""
    import random

    from sailorfog.clues import build_clues
    from sailorfog.oracle import run_oracle
    from sailorfog.parallel import make_synthesizer
    from sailorfog.synth import attempt_rng, obfuscate
    from sailorfog.uncertainty import consistent
    from sailorfog.verify import make_unique

    synth = make_synthesizer(shared)
    spent = Counter()
    done = 0
    for i, sub, target, _ in jobs:
        rng = attempt_rng(shared.seed, i)
        t = time.perf_counter()
        cs = obfuscate(consistent(build_clues(shared.G, sub.nodes, sub.edges, target), shared.index), rng,
                       shared.index)
        unique = make_unique(cs, shared.index, random.Random(i))
        spent["clues_uniqueness"] += time.perf_counter() - t
        if unique.clues is None:
            continue
        task = {"id": str(i), "question": shared.writer.write(unique.clues), "answer": unique.clues.answer}
        t = time.perf_counter()
        run_oracle(synth.env, task, unique.clues, shared.G, sub.edges, shared.index)
        spent["oracle"] += time.perf_counter() - t
        t = time.perf_counter()
        synth._heuristic_solves(task)
        spent["heuristic"] += time.perf_counter() - t
        done += 1
    synth.env.close()
    return {k: v / max(1, len(jobs)) for k, v in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wiki", default="data/wiki", help="a built simulator (default: data/wiki)")
    parser.add_argument("--attempts", type=int, default=200, help="subgraphs attempted per configuration")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--graph-nodes", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=1000, help="task count for the end-to-end rate (setup included)")
    parser.add_argument("--corpus-index", choices=("disk", "memory"), default="disk",
                        help="disk: built once per simulator, memory-mapped (what synth runs); memory: built per run")
    args = parser.parse_args()

    shared, jobs, setup_times = setup(args.wiki, args.seed, args.attempts, args.graph_nodes, args.corpus_index)
    import resource

    rss_setup_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run(shared, jobs[:5], 1)  # warm the page cache and the index's candidate cache before timing
    rows = []
    results = {}
    # The one-process row first: the workers' row then starts from the same warm page cache.
    for name, workers, heuristic in (("full, 1 worker", 1, True),
                                     (f"full, {args.workers} workers", args.workers, True),
                                     (f"no heuristic agent, {args.workers} workers", args.workers, False)):
        shared.heuristic = heuristic
        cpu = time.process_time()
        outcomes, seconds = run(shared, jobs, workers)
        if workers == 1:  # CPU seconds of the one-process row: a rate the machine's load does not change
            cpu_1 = time.process_time() - cpu
        verified = sum(o.record is not None for o in outcomes)
        results[name] = outcomes
        rows.append((name, len(outcomes), verified, seconds, 60 * verified / seconds))
    shared.heuristic = True
    same = [json.dumps(o.record, sort_keys=True) for o in results[rows[0][0]]] == [
        json.dumps(o.record, sort_keys=True) for o in results[rows[1][0]]]
    stages = stage_times(shared, jobs[: max(10, len(jobs) // 4)])

    print(f"simulator {args.wiki}; {len(jobs)} attempts per row; cpus {os.cpu_count()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"setup: graph {setup_times['graph_s']:.1f} s, sampling {setup_times['sampling_s']:.2f} s, "
          f"corpus index {setup_times['index_s']:.1f} s")
    print(f"{'configuration':<34} {'attempts':>8} {'verified':>8} {'seconds':>8} {'verified/min':>12}")
    for name, n, verified, seconds, rate in rows:
        print(f"{name:<34} {n:>8} {verified:>8} {seconds:>8.1f} {rate:>12.1f}")
    print("seconds per attempt, 1 process: " + ", ".join(f"{k} {v:.3f}" for k, v in stages.items()))
    print(f"same records with {args.workers} workers and 1: {same}")
    one, full = rows[0], rows[1]
    setup_s = sum(setup_times.values())
    per_task = full[3] / max(1, full[2])
    end_to_end = 60 * args.n / (setup_s + per_task * args.n)
    out = {
        "benchmark": "synth", "attempts": len(jobs), "workers": args.workers,
        "verified_per_min": round(full[4], 1), "verified_per_min_1_worker": round(one[4], 1),
        "verified_per_min_no_heuristic": round(rows[2][4], 1),
        "verified_per_cpu_min_1_worker": round(60 * one[2] / max(cpu_1, 1e-9), 1),
        "yield": round(full[2] / max(1, full[1]), 3), f"end_to_end_per_min_n{args.n}": round(end_to_end, 1),
        "setup_s": round(setup_s, 1), "stage_s_per_attempt": {k: round(v, 4) for k, v in stages.items()},
        "same_records_across_workers": same, "target_per_min": TARGET_PER_MIN,
        "meets_target": full[4] >= TARGET_PER_MIN, "load_average": round(os.getloadavg()[0], 1),
        "corpus_index": args.corpus_index, "corpus_index_s": round(setup_times["index_s"], 2),
        "peak_rss_mb": {"after_setup": round(rss_setup_mb), "main": round(resource.getrusage(resource.RUSAGE_SELF)
                                                                           .ru_maxrss / 1024),
                        "largest_worker": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)},
    }
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
