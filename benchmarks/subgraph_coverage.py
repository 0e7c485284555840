"""Random-walk subgraph sampling against exhaustive ESU enumeration: isomorphism-class coverage and time.

On graphs small enough to enumerate every connected induced subgraph of 3 to 5 nodes (29
isomorphism classes exist: 2, 6 and 21), side by side in one run:

- **ESU** (Wernicke's enumeration, :mod:`sailorfog.esu`): every subgraph once, each classified;
  its class set is the ground truth and its time the baseline;
- **random walk with jumps** (:mod:`sailorfog.sampling`, what ``sample_subgraphs`` uses),
  given 10% of ESU's time: the share of classes found, and the time it needed to reach 95%
  of them (and all it found);
- **plain random walk** (each step from the last node), the same budget: why the sampler jumps.

Both sides classify with the same exact classifier (adjacency bit mask memoized over one
WL-hash + isomorphism classification per distinct mask), so the comparison is enumeration
against sampling, not classifier against classifier. Each sampler runs with ``--seeds``
seeds; the table reports the worst seed's coverage and the median time to 95%.

Graphs: the dense entity graph built from the simulator in ``--wiki-dir`` (300 nodes by
default), and G(n=50, p=0.25), a uniformly dense graph where the sparse classes (paths,
stars) are the rare ones. Usage: ``python -m benchmarks.subgraph_coverage [--wiki-dir DIR]``.
Prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from typing import Any

import networkx as nx

from sailorfog.esu import esu
from sailorfog.sampling import MaskClassifier, iter_walk_samples

MIN_NODES, MAX_NODES = 3, 5
TARGET_COVERAGE, TARGET_TIME_SHARE = 0.95, 0.10


def run_esu(G: nx.Graph) -> dict[str, Any]:
    classifier = MaskClassifier({u: set(v) for u, v in G.adj.items()})
    start = time.perf_counter()
    count = 0
    for nodes in esu(G, MAX_NODES, MIN_NODES):
        classifier.classify(nodes)
        count += 1
    return {"seconds": time.perf_counter() - start, "subgraphs": count, "classes": set(classifier.found)}


def run_sampler(G: nx.Graph, budget_s: float, total: int, seed: int, jump: bool) -> dict[str, Any]:
    """Sample for ``budget_s`` seconds; when each class was found, and coverage at the end."""
    classifier = MaskClassifier({u: set(v) for u, v in G.adj.items()})
    rng = random.Random(seed)
    need = math.ceil(TARGET_COVERAGE * total)
    t95 = None
    walks = 0
    start = time.perf_counter()
    elapsed = 0.0
    for nodes in iter_walk_samples(G, MIN_NODES, MAX_NODES, rng, jump=jump):
        walks += 1
        if nodes is not None and classifier.classify(nodes)[1]:
            elapsed = time.perf_counter() - start
            if t95 is None and len(classifier.found) >= need:
                t95 = elapsed
            if len(classifier.found) == total:
                break
        if walks % 64 == 0:
            elapsed = time.perf_counter() - start
            if elapsed >= budget_s:
                break
    last_new = elapsed
    return {"coverage": len(classifier.found) / total, "t95": t95, "walks": walks, "last_new_s": last_new,
            "classes": set(classifier.found)}


def compare(name: str, G: nx.Graph, seeds: int) -> dict[str, Any]:
    base = run_esu(G)
    total = len(base["classes"])
    budget = TARGET_TIME_SHARE * base["seconds"]
    row: dict[str, Any] = {"graph": name, "nodes": G.number_of_nodes(), "edges": G.number_of_edges(),
                           "density": round(nx.density(G), 4), "subgraphs": base["subgraphs"], "classes": total,
                           "esu_s": round(base["seconds"], 3)}
    for label, jump in (("walk", True), ("plain", False)):
        runs = [run_sampler(G, budget, total, seed, jump) for seed in range(seeds)]
        assert all(r["classes"] <= base["classes"] for r in runs), "a sampled class ESU did not find"
        t95 = [r["t95"] if r["t95"] is not None else math.inf for r in runs]
        med = statistics.median(t95)
        row[f"{label}_min_coverage"] = round(min(r["coverage"] for r in runs), 4)
        row[f"{label}_mean_coverage"] = round(statistics.mean(r["coverage"] for r in runs), 4)
        row[f"{label}_t95_share"] = round(med / base["seconds"], 4) if math.isfinite(med) else None
        row[f"{label}_walks"] = int(statistics.median(r["walks"] for r in runs))
        missing = set.union(*(base["classes"] - r["classes"] for r in runs))
        row[f"{label}_classes_missed_by_some_seed"] = len(missing)
    return row


def entity_graph(wiki_dir: str, max_nodes: int) -> nx.Graph:
    from sailorfog.graph import GraphConfig, build_graph
    from wiki_sim import WikiSim

    with WikiSim(wiki_dir) as sim:
        return build_graph(sim, GraphConfig(max_nodes=max_nodes))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wiki-dir", default="data/wiki", help="simulator to build the entity graph from")
    parser.add_argument("--nodes", type=int, default=300, help="entity graph size")
    parser.add_argument("--seeds", type=int, default=5, help="sampler runs (random seeds) per graph")
    args = parser.parse_args(argv)
    graphs = [("entity-dense", entity_graph(args.wiki_dir, args.nodes)),
              ("gnp(50,0.25)", nx.gnp_random_graph(50, 0.25, seed=0))]
    rows = [compare(name, G, args.seeds) for name, G in graphs]
    print(f"connected induced subgraphs with {MIN_NODES}-{MAX_NODES} nodes; samplers get "
          f"{TARGET_TIME_SHARE:.0%} of ESU's time; worst of {args.seeds} seeds")
    head = f"{'graph':<14}{'N':>5}{'E':>6}{'dens':>7}{'subgraphs':>11}{'classes':>8}{'ESU s':>8}"
    head += f"{'walk cov':>10}{'t95/ESU':>9}{'plain cov':>10}{'t95/ESU':>9}"
    print(head)
    for r in rows:
        def share(x: float | None) -> str:
            return f"{x:.3f}" if x is not None else "never"

        print(f"{r['graph']:<14}{r['nodes']:>5}{r['edges']:>6}{r['density']:>7.3f}{r['subgraphs']:>11}"
              f"{r['classes']:>8}{r['esu_s']:>8.2f}{r['walk_min_coverage']:>10.1%}{share(r['walk_t95_share']):>9}"
              f"{r['plain_min_coverage']:>10.1%}{share(r['plain_t95_share']):>9}")
    ok = all(r["walk_min_coverage"] >= TARGET_COVERAGE for r in rows)
    result = {"benchmark": "subgraph_coverage", "min_nodes": MIN_NODES, "max_nodes": MAX_NODES,
              "time_share": TARGET_TIME_SHARE, "target_met": ok, "rows": rows}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
