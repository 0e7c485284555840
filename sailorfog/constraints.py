"""Which pages of the whole simulator could each entity of a clue set be?

Each clue's ``checks`` are constraints over the entities' labels. Unary checks (words,
description, year, number, fact, name prefix, initials, exclusions) cut a label's
candidate set with the corpus index; binary checks (``link``, ``relyear``, ``earlier``)
are made arc-consistent (AC-3). The answer is unique when its label keeps exactly one
candidate. Arc consistency over-approximates the solutions of a cyclic subgraph, so a
count of one is a proof of uniqueness, and a larger count an upper bound.

Check types (``node``/``a``/``b``/``ref``/``other`` are labels):
``type {node, words}`` (the defining sentence's type holds the words), ``person {node}`` (the type is a person's),
``name_words {node, n}``, ``words {node, words}``, ``description {node, words}``, ``year {node, lo, hi}``,
``number {node, lo, hi}``, ``fact {node, key, value}``, ``prefix {node, prefix}``,
``initials {node, initials}``, ``not_title {node, title}``, ``not_prefix {node, prefix}``,
``link {a, b}``, ``relyear {node, ref, lo, hi}`` (a year of node minus a year of ref in
[lo, hi]), ``earlier {node, other}`` (node's earliest year is before other's).
"""

from __future__ import annotations

import bisect
import json
from typing import Any, Iterable, Mapping

from sailorfog.corpus import CorpusIndex

UNARY = {"type", "person", "name_words", "words", "description", "year", "number", "fact", "prefix", "initials",
         "not_title", "not_prefix"}
BINARY = {"link", "relyear", "earlier"}
Domains = dict[str, set[int]]


def check_labels(check: Mapping[str, Any]) -> list[str]:
    """The labels a check constrains."""
    return [check[k] for k in ("node", "a", "b", "ref", "other") if k in check]


def unary_candidates(index: CorpusIndex, check: Mapping[str, Any]) -> frozenset[int]:
    """The pages satisfying a unary check (cached on the index: clue sets reuse their checks)."""
    key = json.dumps(check, sort_keys=True)
    found = index.cache.get(key)
    if found is None:
        if len(index.cache) > 100_000:
            index.cache.clear()
        found = index.cache[key] = frozenset(_unary(index, check))
    return found


def _unary(index: CorpusIndex, check: Mapping[str, Any]) -> set[int]:
    kind = check["type"]
    if kind == "type":
        return index.with_type(check["words"])
    if kind == "person":
        return index.with_person()
    if kind == "name_words":
        return index.with_name_words(check["n"])
    if kind == "words":
        return index.with_words(check["words"])
    if kind == "description":
        return index.with_words(check["words"], description=True)
    if kind == "year":
        return index.with_year(check["lo"], check["hi"])
    if kind == "number":
        return index.with_number(check["lo"], check["hi"])
    if kind == "fact":
        return index.with_fact(check["key"], check["value"])
    if kind == "prefix":
        return index.with_prefix(check["prefix"])
    if kind == "initials":
        return index.with_initials(check["initials"])
    if kind == "not_title":
        pid = index.ids.get(check["title"])
        return set(range(len(index))) - ({pid} if pid is not None else set())
    if kind == "not_prefix":
        return set(range(len(index))) - index.with_prefix(check["prefix"])
    raise ValueError(f"unknown check type {kind!r}; expected one of {sorted(UNARY | BINARY)}")


def _years_of(index: CorpusIndex, pages: Iterable[int]) -> list[int]:
    if hasattr(index, "years_of"):  # the memory-mapped index reads them in one vectorized pass
        return index.years_of(pages)
    out: set[int] = set()
    for p in pages:
        out |= index.page_years[p]
    return sorted(out)


def _revise(index: CorpusIndex, check: Mapping[str, Any], doms: Domains) -> list[str]:
    """Remove unsupported candidates on both sides of a binary check; the labels changed."""
    kind = check["type"]
    changed = []
    if kind == "link":
        a, b = check["a"], check["b"]
        for x, y in ((a, b), (b, a)):
            if len(doms[y]) == len(index):
                new = doms[x] & index.linked()
            else:
                if hasattr(index, "neighbors_of"):
                    support = index.neighbors_of(doms[y])
                else:
                    support = set()
                    for p in doms[y]:
                        support |= index.neighbors[p]
                new = doms[x] & support
            if len(new) < len(doms[x]):
                doms[x] = new
                changed.append(x)
    elif kind == "relyear":
        node, ref, lo, hi = check["node"], check["ref"], check["lo"], check["hi"]
        ref_years = _years_of(index, doms[ref])
        node_years = _years_of(index, doms[node])
        if hasattr(index, "with_year_near"):
            ok_node = index.with_year_near(doms[node], ref_years, -hi, -lo)
            ok_ref = index.with_year_near(doms[ref], node_years, lo, hi)
        else:
            ok_node = {p for p in doms[node]
                       if any(_has_between(ref_years, y - hi, y - lo) for y in index.page_years[p])}
            ok_ref = {p for p in doms[ref]
                      if any(_has_between(node_years, r + lo, r + hi) for r in index.page_years[p])}
        for label, new in ((node, ok_node), (ref, ok_ref)):
            if len(new) < len(doms[label]):
                doms[label] = new
                changed.append(label)
    elif kind == "earlier":
        node, other = check["node"], check["other"]
        other_max = max((index.page_min_year[p] for p in doms[other] if index.page_min_year[p] is not None),
                        default=None)
        node_min = min((index.page_min_year[p] for p in doms[node] if index.page_min_year[p] is not None),
                       default=None)
        ok_node = {p for p in doms[node] if other_max is not None and index.page_min_year[p] is not None
                   and index.page_min_year[p] < other_max}
        ok_other = {p for p in doms[other] if node_min is not None and index.page_min_year[p] is not None
                    and index.page_min_year[p] > node_min}
        for label, new in ((node, ok_node), (other, ok_other)):
            if len(new) < len(doms[label]):
                doms[label] = new
                changed.append(label)
    else:
        raise ValueError(f"unknown binary check type {kind!r}; expected one of {sorted(BINARY)}")
    return changed


def _has_between(sorted_values: list[int], lo: float, hi: float) -> bool:
    i = bisect.bisect_left(sorted_values, lo)
    return i < len(sorted_values) and sorted_values[i] <= hi


def solve(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
          max_rounds: int = 50) -> Domains:
    """Arc-consistent candidate sets (page ids) for every label under ``checks``."""
    checks = list(checks)
    everything = index.everything()  # shared, never changed in place: every update makes a new set
    doms: Domains = {label: everything for label in labels}
    for check in checks:
        if check["type"] in UNARY:
            label = check["node"]
            doms[label] = doms.get(label, everything) & unary_candidates(index, check)
    binary = [c for c in checks if c["type"] in BINARY]
    for c in binary:
        for label in check_labels(c):
            doms.setdefault(label, everything)
    queue = list(range(len(binary)))
    rounds = 0
    while queue and rounds < max_rounds * max(1, len(binary)):
        rounds += 1
        i = queue.pop(0)
        for label in _revise(index, binary[i], doms):
            for j, other in enumerate(binary):
                if j != i and j not in queue and label in check_labels(other):
                    queue.append(j)
    return doms


def candidates(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
               target_label: str = "X") -> set[int]:
    """The answer's candidate pages."""
    return solve(index, checks, labels)[target_label]


def satisfied_by(index: CorpusIndex, check: Mapping[str, Any], assignment: Mapping[str, str]) -> bool:
    """Whether the true titles (label -> title) satisfy one check."""
    ids = {label: index.ids.get(title) for label, title in assignment.items()}
    if any(ids.get(label) is None for label in check_labels(check)):
        return False
    doms = {label: {ids[label]} for label in check_labels(check)}
    if check["type"] in UNARY:
        return ids[check["node"]] in unary_candidates(index, check)
    _revise(index, check, doms)
    return all(doms[label] for label in doms)
