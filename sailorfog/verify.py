"""Uniqueness: does the obfuscated clue set pick out the answer among all pages of the simulator?

:func:`make_unique` evaluates the clue set against the whole corpus index
(:mod:`sailorfog.constraints`), and while other pages still fit it strengthens the set
from its pool (descriptions, facts, dates, numbers; the answer's own clues first), then
with an exclusion; it records the number of candidates after every step and gives up
(returns ``None``) when the set stays ambiguous.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from sailorfog.clues import TARGET_LABEL, Clue, ClueSet
from sailorfog.constraints import candidate_pages, count_candidates
from sailorfog.corpus import CorpusIndex
from sailorfog.pagesets import contains
from sailorfog.uncertainty import all_checks, exclusion

_POOL_ORDER = {"description": 0, "fact": 1, "date": 2, "number": 3}


@dataclass
class Uniqueness:
    """The outcome of the uniqueness check."""

    clues: ClueSet | None
    """The (strengthened) clue set, ``None`` when no strengthening made it unique."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """``{"step", "clue", "candidates"}`` after the base set and after each added clue."""
    reason: str = ""
    """Why it was dropped (empty when unique)."""

    @property
    def candidate_counts(self) -> list[int]:
        return [s["candidates"] for s in self.steps]


def _count(index: CorpusIndex, cs: ClueSet) -> int:
    return count_candidates(index, all_checks(cs), cs.titles)


def _pool_key(clue: Clue) -> tuple[int, int, str]:
    label = clue.checks[0].get("node", "") if clue.checks else ""
    return (label != TARGET_LABEL, _POOL_ORDER.get(clue.kind, 9), clue.id)


def make_unique(cs: ClueSet, index: CorpusIndex, rng: random.Random, max_added: int = 6) -> Uniqueness:
    """Strengthen ``cs`` until the answer is its only candidate in the corpus, or give up."""
    target = index.ids.get(cs.target)
    if target is None:
        return Uniqueness(None, [], f"the answer {cs.target!r} is not a page of the simulator")
    if not cs.clues:
        return Uniqueness(None, [], "no clue survived the leakage and consistency checks")
    cs = cs.copy()
    count = _count(index, cs)
    steps = [{"step": "base", "clue": "", "candidates": count}]
    if not contains(candidate_pages(index, all_checks(cs), cs.titles), target):
        return Uniqueness(None, steps, "the answer does not satisfy its own clues")
    added = 0
    for clue in sorted(cs.pool, key=_pool_key):
        if count <= 1 or added >= max_added:
            break
        trial = cs.copy()
        trial.clues.append(clue)
        trial.pool = [c for c in trial.pool if c.id != clue.id]
        new = _count(index, trial)
        if new < count:
            cs, count, added = trial, new, added + 1
            steps.append({"step": "add", "clue": clue.id, "candidates": count})
    if count > 1:
        excluded = exclusion(cs, rng, index)
        if excluded is not None:
            new = _count(index, excluded)
            if new < count:
                cs, count = excluded, new
                steps.append({"step": "exclusion", "clue": "excl", "candidates": count})
    if count != 1:
        return Uniqueness(None, steps, f"{count} candidate answers remain after strengthening")
    return Uniqueness(cs, steps)
