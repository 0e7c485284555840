"""The synthesis pipeline: subgraph -> target -> clues -> uncertainty -> uniqueness -> question -> oracle.

:class:`Synthesizer` turns the ``i``-th sampled subgraph into one task record (or a reason
it was dropped) using only ``(seed, i)`` for randomness, so the same seed and corpus give
the same records in the same order, and a run can resume at the next attempt.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import networkx as nx

from sailorfog.clues import ClueSet, build_clues, question_leaks
from sailorfog.corpus import CorpusIndex
from sailorfog.oracle import run_oracle
from sailorfog.uncertainty import apply, blur_pool, consistent, distractor, weak_constraints
from sailorfog.verify import make_unique
from sailorfog.writers import Writer

GENERATOR_VERSION = "sailorfog-0.1"
# (kind, probability) applied in this order before the uniqueness check; the blurring
# kinds come last so that clues moved from the pool are blurred too.
PLAN: tuple[tuple[str, float], ...] = (
    ("entity_by_description", 0.7),
    ("partial_names", 0.4),
    ("relative_time", 0.35),
    ("comparison", 0.35),
    ("vague_time", 0.85),
    ("fuzzy_quantities", 0.85),
)


def attempt_rng(seed: int, index: int) -> random.Random:
    """The random generator of attempt ``index`` (independent of every other attempt)."""
    return random.Random(f"sailorfog:{seed}:{index}")


def obfuscate(cs: ClueSet, rng: random.Random, index: CorpusIndex) -> ClueSet:
    """The planned uncertainty transformations, each applied with its probability when it applies."""
    for kind, p in PLAN:
        if rng.random() >= p:
            continue
        out = apply(kind, cs, rng, index)
        if out is not None:
            cs = out
        if kind in ("vague_time", "fuzzy_quantities"):
            cs = blur_pool(cs, rng, kind)
    return cs


def target_role(nodes: Sequence[str], edges: Sequence[tuple[str, str]], target: str) -> str:
    """The answer's structural role, comparable across topologies (``d1e3``: degree 1, eccentricity 3)."""
    from sailorfog.orbits import orbit_role

    H = nx.Graph()
    H.add_nodes_from(nodes)
    H.add_edges_from(edges)
    return orbit_role(H, frozenset([target]))


def target_hops(G: nx.Graph, nodes: Sequence[str], target: str) -> int:
    """The largest number of edges between the answer and another entity of the subgraph."""
    return max(nx.single_source_shortest_path_length(G.subgraph(nodes), target).values())


@dataclass
class Outcome:
    """What became of one attempt."""

    index: int
    record: dict[str, Any] | None = None
    reason: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Synthesizer:
    """Everything one run shares: graph, corpus index, environment, writer."""

    G: nx.Graph
    index: CorpusIndex
    env: Any
    """A ``websailor/WikiSim-v0`` environment over the same simulator (search and visit tools)."""
    writer: Writer
    seed: int
    aliases: Mapping[str, Sequence[str]]
    heuristic: bool = True
    """Also play the scripted heuristic agent (part of the difficulty)."""
    corpus: str = ""
    """The simulator's source fingerprint, recorded in every task's ``generator``."""
    counts: Counter = field(default_factory=Counter)

    def task_id(self, index: int) -> str:
        return f"sailorfog-{self.seed}-{index}"

    def attempt(self, index: int, subgraph: Any, target: str, orbit: int) -> Outcome:
        rng = attempt_rng(self.seed, index)
        nodes, edges = list(subgraph.nodes), [tuple(e) for e in subgraph.edges]
        cs = consistent(build_clues(self.G, nodes, edges, target, self.aliases), self.index)
        cs = obfuscate(cs, rng, self.index)
        unique = make_unique(cs, self.index, rng)
        if unique.clues is None:
            return Outcome(index, None, f"not unique: {unique.reason}", unique.steps)
        cs = weak_constraints(unique.clues, rng, self.index) or unique.clues
        cs = distractor(cs, rng, self.index) or cs
        question = self.writer.write(cs)
        leaked = question_leaks(question, cs, self.aliases)
        if leaked:
            return Outcome(index, None, f"leak: the question names {leaked}", unique.steps)
        task = {"id": self.task_id(index), "question": question, "answer": cs.answer, "aliases": cs.aliases}
        oracle = run_oracle(self.env, task, cs, self.G, edges, self.index, self.aliases)
        if not oracle.solved:
            return Outcome(index, None, f"oracle: {oracle.reason}", unique.steps)
        solved = self._heuristic_solves(task) if self.heuristic else None
        record = {
            **task,
            "uncertainty": uncertainty_kinds(cs),
            "subgraph": self._subgraph(nodes, edges, cs),
            "wl_hash": subgraph.wl_hash,
            "target_orbit": orbit,
            "target_role": target_role(nodes, edges, target),
            "hops": target_hops(self.G, nodes, target),
            "clues": [{"id": c.id, "kind": c.kind, "text": c.text, "checks": c.checks, "evidence": c.evidence,
                       "uncertainty": c.uncertainty} for c in cs.clues],
            "uniqueness": {"steps": unique.steps, "candidates": 1},
            "distractor": cs.distractor,
            "oracle": oracle.record,
            "difficulty": difficulty(oracle.tool_calls, solved),
            "generator": {"version": GENERATOR_VERSION, "seed": self.seed, "index": index,
                          "writer": self.writer.name, "corpus": self.corpus},
        }
        return Outcome(index, record, "", unique.steps)

    def _heuristic_solves(self, task: Mapping[str, Any]) -> bool:
        from envs.baselines import HeuristicAgent
        from envs.episode import run_episode

        return run_episode(self.env, HeuristicAgent(), options={"task": dict(task)}).is_correct

    def _subgraph(self, nodes: Sequence[str], edges: Sequence[tuple[str, str]], cs: ClueSet) -> dict[str, Any]:
        labels = cs.labels
        out_nodes = []
        for title in sorted(nodes, key=lambda t: labels[t]):
            data = self.G.nodes[title]
            out_nodes.append({"title": title, "label": labels[title], "url": data.get("url", ""),
                              "provenance": data.get("provenance") or {}})
        out_edges = []
        for u, v in sorted(tuple(sorted(e)) for e in edges):
            relations = [{k: r.get(k) for k in ("source", "target", "kind", "key", "sentence", "query", "url")}
                         for r in self.G.edges[u, v].get("relations") or []]
            out_edges.append({"source": u, "target": v, "relations": relations[:3]})
        return {"nodes": out_nodes, "edges": out_edges, "target": cs.target}


# Clue kinds that are themselves an uncertainty kind, whichever step added them.
_KIND_OF_CLUE = {"description": "entity_by_description", "name": "partial_names", "relative_time": "relative_time",
                 "comparison": "comparison", "exclusion": "exclusion"}
_SET_KINDS = ("weak_constraints", "distractor")


def uncertainty_kinds(cs: ClueSet) -> list[str]:
    """The kinds the final question uses: those of its clues, and the set-level ones."""
    kinds = {k for c in cs.clues for k in c.uncertainty}
    kinds |= {_KIND_OF_CLUE[c.kind] for c in cs.clues if c.kind in _KIND_OF_CLUE}
    kinds |= {k for k in _SET_KINDS if k in cs.uncertainty}
    return sorted(kinds)


def difficulty(tool_calls: int, heuristic_solved: bool | None) -> dict[str, Any]:
    """Oracle tool calls, whether the heuristic agent solved it, and a coarse level."""
    if heuristic_solved:
        level = "easy"
    elif tool_calls > 10:
        level = "hard"
    else:
        level = "medium"
    return {"oracle_tool_calls": tool_calls, "heuristic_solved": heuristic_solved, "level": level}
