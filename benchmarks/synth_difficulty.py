"""Do synthesized questions need research? Attackers against the tasks, side by side.

For each corpus (the default simulator; ``--wiki2``, e.g. the gensim enwiki sample) and each
generator (``research``, the default: two hidden entities on the way; ``research depth 1``, one; ``research
depth 0``, the one-hop curriculum level; ``subgraph``, the earlier generator whose clues quote pages), in one
run:

- (a) the share of tasks whose answer page is in the top 10 for the whole question as one query,
  (b) for the best single sentence or clause, (c) for the best 6-word window, (d) for the answer's
  stated type searched with the title of an entity linked to it ("officer Burkina Faso": what a
  reader whose knowledge names one neighbour searches; ``neighbour`` in the table);
- the heuristic baseline's success, a stronger scripted agent's success (search each clause, read
  the top hits, search again from them, intersect: :class:`sailorfog.attacks.ClauseAgent`), the
  oracle's success (replayed gold trajectories judged correct);
- question length in words (CJK characters count as words) beside the released SailorFog-QA
  samples; answers' inbound-link quantiles against the corpus's; verified tasks per minute.

Targets (research default): (a) <= 10%, (b), (c) <= 25%, (d) <= 30%, heuristic <= 10%, scripted
agent 10-70%, oracle 100%, 40-110 words, >= 100 verified tasks/min on 2 cores.
Usage: ``python -m benchmarks.synth_difficulty [--wiki data/wiki] [--wiki2 DIR] [--n 100]``;
prints a table, then one line of JSON.
"""

from __future__ import annotations

import argparse
from collections import Counter
import json
import tempfile
import time
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "sailorfog_qa_sample.jsonl"
TARGETS = {"whole": 0.10, "clause": 0.25, "window": 0.25, "neighbour": 0.30, "wl_classes": 10, "top_wl_share": 0.40,
           "heuristic": 0.10, "agent": (0.10, 0.70),
           "words": (40, 110), "per_min": 100.0}


def synthesize(wiki: str, out: Path, n: int, mode: str, depth: int, workers: int) -> tuple[list[dict], float]:
    from sailorfog.cli import SynthConfig, run_synth

    t = time.perf_counter()
    run_synth(SynthConfig(wiki=wiki, out=str(out), n=n, mode=mode, depth=depth, workers=workers, progress=False,
                          heuristic=False))
    elapsed = time.perf_counter() - t
    return [json.loads(line) for line in out.open(encoding="utf-8")], elapsed


def quantiles(values: list[int], qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> list[int]:
    v = sorted(values)
    return [v[min(len(v) - 1, int(q * len(v)))] for q in qs] if v else []


def attack(wiki: str, tasks: list[dict]) -> dict[str, Any]:
    import gymnasium as gym

    import envs  # noqa: F401
    from envs.baselines import HeuristicAgent
    from envs.episode import run_episode
    from sailorfog.attacks import (ClauseAgent, answer_kind, asked_kind, neighbour_titles, shortcut_ranks,
                                   type_neighbour_rank)
    from sailorfog.report import count_words
    from wiki_sim import WikiSim

    env = gym.make("websailor/WikiSim-v0", wiki_dir=wiki, tasks=[{"question": "placeholder", "answer": "placeholder"}],
                   tools=["search", "visit"])
    hits = {"whole": 0, "clause": 0, "window": 0, "neighbour": 0}
    typed = 0
    solved = {"heuristic": 0, "agent": 0, "oracle": 0}
    with WikiSim(wiki) as sim:
        inbound = {p.title: p.inbound_links for p in sim.iter_pages()}
        for t in tasks:
            target = (t.get("subgraph") or {}).get("target") or t["answer"]
            ranks = shortcut_ranks(sim, t["question"], {target})
            kind = answer_kind(t) or asked_kind(t["question"])
            typed += bool(kind)  # a question that states no type for its answer has no such attack
            ranks["neighbour"] = type_neighbour_rank(sim, kind, neighbour_titles(t), {target})
            for k, r in ranks.items():
                hits[k] += r is not None
            task = {k: t[k] for k in ("id", "question", "answer", "aliases") if k in t}
            for name, policy in (("heuristic", HeuristicAgent()), ("agent", ClauseAgent())):
                solved[name] += run_episode(env, policy, options={"task": task}).is_correct
            solved["oracle"] += bool((t.get("oracle") or {}).get("is_correct"))
    env.close()
    n = max(1, len(tasks))
    words = [count_words(t["question"]) for t in tasks]
    answers = [inbound.get((t.get("subgraph") or {}).get("target") or t["answer"], 0) for t in tasks]
    shares = {k: round(v / n, 3) for k, v in hits.items()}
    shares["neighbour"] = round(hits["neighbour"] / typed, 3) if typed else None
    return {"tasks": len(tasks), **shares,
            **{k: round(v / n, 3) for k, v in solved.items()},
            "words_mean": round(sum(words) / n, 1), "words_min": min(words, default=0),
            "words_max": max(words, default=0),
            "calls_mean": round(sum((t.get("difficulty") or {}).get("oracle_tool_calls", 0) for t in tasks) / n, 2),
            "answer_inbound_q50_q90_q99": quantiles(answers), "corpus_inbound_q50_q90_q99": quantiles(
                list(inbound.values())),
            "wl_classes": len({t.get("wl_hash") for t in tasks}),
            "top_wl_share": round(max(Counter(t.get("wl_hash") for t in tasks).values(), default=0) / n, 3),
            "max_answer_repeats": max(Counter(t["answer"] for t in tasks).values(),
                                      default=0)}


def reference_row() -> dict[str, Any] | None:
    from sailorfog.report import count_words

    if not REFERENCE.is_file():
        return None
    qs = [json.loads(line)["question"] for line in REFERENCE.open(encoding="utf-8") if line.strip()]
    words = [count_words(q) for q in qs]
    return {"tasks": len(qs), "words_mean": round(sum(words) / len(words), 1), "words_min": min(words),
            "words_max": max(words)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--wiki", default="data/wiki")
    p.add_argument("--wiki2", default=None, help="a second simulator (e.g. the gensim enwiki sample)")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpora = [("default", args.wiki)] + ([("wiki2", args.wiki2)] if args.wiki2 else [])
        for cname, wiki in corpora:
            for gname, mode, depth in (("research", "research", 2), ("research-depth1", "research", 1),
                                       ("research-depth0", "research", 0), ("subgraph", "subgraph", 1)):
                try:
                    tasks, secs = synthesize(wiki, Path(tmp) / f"{cname}-{gname}.jsonl", args.n, mode, depth,
                                             args.workers)
                except ValueError as exc:
                    rows[f"{cname}/{gname}"] = {"error": str(exc)[:200]}
                    continue
                row = attack(wiki, tasks)
                row["tasks_per_min"] = round(60 * len(tasks) / secs, 1)
                rows[f"{cname}/{gname}"] = row
    ref = reference_row()
    if ref:
        rows["released SailorFog-QA sample"] = ref
    cols = ("tasks", "whole", "clause", "window", "neighbour", "heuristic", "agent", "oracle", "words_mean", "calls_mean",
            "wl_classes", "top_wl_share", "tasks_per_min")
    print(f"{'':34s}" + "".join(f"{c:>13s}" for c in cols))
    for name, row in rows.items():
        print(f"{name:34s}" + "".join(f"{'-' if row.get(c) is None else str(row[c]):>13s}" for c in cols) + (
            f"  {row['error']}" if "error" in row else ""))
    for name, row in rows.items():
        if "answer_inbound_q50_q90_q99" in row:
            print(f"{name}: answers' inbound links q50/q90/q99 {row['answer_inbound_q50_q90_q99']} vs corpus "
                  f"{row['corpus_inbound_q50_q90_q99']}; most repeats of one answer {row['max_answer_repeats']}")
    print(json.dumps({"benchmark": "synth_difficulty", "targets": TARGETS, "rows": rows}, sort_keys=True))


if __name__ == "__main__":
    main()
