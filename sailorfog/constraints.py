"""Which pages of the whole simulator could each entity of a clue set be?

Each clue's ``checks`` are constraints over the entities' labels. Unary checks (words,
description, year, number, fact, name prefix, initials, exclusions) cut a label's
candidate set with the corpus index; binary checks (``link``, ``relyear``, ``earlier``)
are made arc-consistent (AC-3). The answer is unique when its label keeps exactly one
candidate. Arc consistency over-approximates the solutions of a cyclic subgraph, so a
count of one is a proof of uniqueness, and a larger count an upper bound.

Candidate sets are sorted page-id arrays (:mod:`sailorfog.pagesets`): a unary check's set
is computed once and kept in the index's byte-bounded cache, intersections search the
smaller set in the larger, and a link check reads the adjacency of whichever side has
fewer links, so a check's cost follows the sizes of the sets, not of the corpus.

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

import numpy as np

from sailorfog.corpus import CorpusIndex
from sailorfog.pagesets import EMPTY, as_pages, contains, dedupe_sorted, difference, distinct, intersect, isin_sorted

UNARY = {"type", "person", "name_words", "words", "description", "year", "number", "fact", "prefix", "initials",
         "not_title", "not_prefix"}
BINARY = {"link", "relyear", "earlier"}
EXCLUDING = {"not_title", "not_prefix"}
"""Unary checks that remove a few pages from all the others (applied as a difference)."""
Domains = dict[str, set[int]]
ArrayDomains = dict[str, Any]
"""label -> sorted page-id array, or ``None`` for every page."""
NO_YEAR = int(np.iinfo(np.int32).min)


def check_labels(check: Mapping[str, Any]) -> list[str]:
    """The labels a check constrains."""
    return [check[k] for k in ("node", "a", "b", "ref", "other") if k in check]


def _key(check: Mapping[str, Any]) -> str:
    """A unary check's cache key: its parameters, not the label it applies to."""
    return json.dumps({k: v for k, v in check.items() if k != "node"}, sort_keys=True)


def unary_pages(index: CorpusIndex, check: Mapping[str, Any]) -> np.ndarray:
    """The pages satisfying a unary check, a sorted array (cached on the index, bounded in bytes:
    clue sets reuse their checks). For ``not_title``/``not_prefix``: the pages they exclude."""
    key = _key(check)
    found = index.cache.get(key)
    if found is None:
        if hasattr(index, "unary_array"):  # the memory-mapped index answers with arrays
            found = as_pages(index.unary_array(_positive(check)))
        else:
            found = as_pages(_unary(index, _positive(check)))
        index.cache[key] = found
    return found


def unary_size(index: CorpusIndex, check: Mapping[str, Any]) -> int:
    """How many pages satisfy a unary check alone."""
    if check["type"] in EXCLUDING:
        return len(index) - len(unary_pages(index, check))
    return len(unary_pages(index, check))


def unary_candidates(index: CorpusIndex, check: Mapping[str, Any]) -> frozenset[int]:
    """The pages satisfying a unary check, as a set."""
    pages = unary_pages(index, check)
    if check["type"] in EXCLUDING:
        return frozenset(range(len(index))) - frozenset(pages.tolist())
    return frozenset(pages.tolist())


def _positive(check: Mapping[str, Any]) -> Mapping[str, Any]:
    """An excluding check as the check of the pages it excludes."""
    if check["type"] == "not_title":
        return {"type": "title", "title": check["title"]}
    if check["type"] == "not_prefix":
        return {"type": "prefix", "prefix": check["prefix"]}
    return check


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
    if kind == "title":
        pid = index.ids.get(check["title"])
        return {pid} if pid is not None else set()
    raise ValueError(f"unknown check type {kind!r}; expected one of {sorted(UNARY | BINARY)}")


# --- the index as arrays: adjacency, years, earliest years (views of the memory-mapped files) ---
def _arrays(index: CorpusIndex) -> dict[str, np.ndarray]:
    if hasattr(index, "solver_arrays"):
        return index.solver_arrays()
    cached = getattr(index, "_solver", None)
    if cached is not None and cached["n"] == len(index):
        return cached
    nb_off, nb_val = _csr([sorted(s) for s in index.neighbors])
    y_off, y_val = _csr([sorted(s) for s in index.page_years])
    min_year = np.fromiter((NO_YEAR if y is None else y for y in index.page_min_year), np.int64,
                           len(index.page_min_year))
    out = {"n": len(index), "nb_off": nb_off, "nb_val": nb_val, "y_off": y_off, "y_val": y_val,
           "min_year": min_year, "years": np.unique(y_val), "linked": np.flatnonzero(np.diff(nb_off))}
    index._solver = out
    return out


def _csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.fromiter((v for r in rows for v in r), np.int64, int(offsets[-1]))
    return offsets, values


def _gather(off: np.ndarray, val: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, value) of every value of ``rows`` of a CSR table."""
    starts, ends = off[rows], off[rows + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return rows[:0], val[:0]
    first = np.cumsum(lengths) - lengths
    positions = np.repeat(starts - first, lengths) + np.arange(total)
    return np.repeat(rows, lengths), val[positions]


def _all(arrays: dict[str, np.ndarray], dom: Any) -> np.ndarray:
    return np.arange(arrays["n"]) if dom is None else dom


def _link_support(arrays: dict[str, np.ndarray], dom_x: Any, dom_y: np.ndarray) -> np.ndarray:
    """The pages of ``dom_x`` (``None``: every page) linked with a page of ``dom_y``, read from the
    adjacency of whichever side has fewer links."""
    off, val = arrays["nb_off"], arrays["nb_val"]
    links_y = int((off[dom_y + 1] - off[dom_y]).sum())
    links_x = int((off[dom_x + 1] - off[dom_x]).sum()) if dom_x is not None and len(dom_x) < len(dom_y) * 4 \
        else None
    if links_x is not None and links_x < links_y:
        rows, nbs = _gather(off, val, dom_x)
        return dedupe_sorted(rows[isin_sorted(nbs, dom_y)])
    support = distinct(_gather(off, val, dom_y)[1], arrays["n"])
    return support if dom_x is None else intersect(dom_x, support)


def _years_of(arrays: dict[str, np.ndarray], dom: Any) -> np.ndarray:
    if dom is None:
        return arrays["years"]
    return np.unique(_gather(arrays["y_off"], arrays["y_val"], dom)[1])


def _with_year_near(arrays: dict[str, np.ndarray], dom: Any, years: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Pages of ``dom`` with a year y such that some of ``years`` (sorted) is in [y + lo, y + hi]."""
    dom = _all(arrays, dom)
    rows, ys = _gather(arrays["y_off"], arrays["y_val"], dom)
    if not len(rows) or not len(years):
        return dom[:0]
    values = years.astype(np.float64)
    ys = ys.astype(np.float64)
    i = np.searchsorted(values, ys + lo, "left")
    ok = i < len(values)
    ok[ok] = values[i[ok]] <= (ys + hi)[ok]
    return dedupe_sorted(rows[ok])


def _size(arrays: dict[str, np.ndarray], dom: Any) -> int:
    return arrays["n"] if dom is None else len(dom)


def _revise(index: CorpusIndex, check: Mapping[str, Any], doms: ArrayDomains) -> list[str]:
    """Remove unsupported candidates on both sides of a binary check; the labels changed."""
    arrays = _arrays(index)
    kind = check["type"]
    news: list[tuple[str, Any]] = []
    if kind == "link":
        a, b = check["a"], check["b"]
        for x, y in ((a, b), (b, a)):
            if doms[y] is None or len(doms[y]) == arrays["n"]:
                new = arrays["linked"] if doms[x] is None else intersect(doms[x], arrays["linked"])
            else:
                new = _link_support(arrays, doms[x], doms[y])
            if len(new) < _size(arrays, doms[x]):
                doms[x] = new
                news.append((x, new))
        return [x for x, _ in news]
    if kind == "relyear":
        node, ref, lo, hi = check["node"], check["ref"], check["lo"], check["hi"]
        ref_years, node_years = _years_of(arrays, doms[ref]), _years_of(arrays, doms[node])
        news = [(node, _with_year_near(arrays, doms[node], ref_years, -hi, -lo)),
                (ref, _with_year_near(arrays, doms[ref], node_years, lo, hi))]
    elif kind == "earlier":
        node, other = check["node"], check["other"]
        mins = arrays["min_year"]
        node_dom, other_dom = _all(arrays, doms[node]), _all(arrays, doms[other])
        other_y, node_y = mins[other_dom], mins[node_dom]
        other_y, node_y_known = other_y[other_y != NO_YEAR], node_y[node_y != NO_YEAR]
        other_max = int(other_y.max()) if len(other_y) else None
        node_min = int(node_y_known.min()) if len(node_y_known) else None
        ok_node = node_dom[(node_y != NO_YEAR) & (node_y < other_max)] if other_max is not None else EMPTY
        oy = mins[other_dom]
        ok_other = other_dom[(oy != NO_YEAR) & (oy > node_min)] if node_min is not None else EMPTY
        news = [(node, ok_node), (other, ok_other)]
    else:
        raise ValueError(f"unknown binary check type {kind!r}; expected one of {sorted(BINARY)}")
    changed = []
    for label, new in news:
        if len(new) < _size(arrays, doms[label]):
            doms[label] = new
            changed.append(label)
    return changed


def _has_between(sorted_values: list[int], lo: float, hi: float) -> bool:
    i = bisect.bisect_left(sorted_values, lo)
    return i < len(sorted_values) and sorted_values[i] <= hi


def solve_arrays(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
                 max_rounds: int = 50) -> ArrayDomains:
    """Arc-consistent candidate sets for every label under ``checks``: sorted page-id arrays
    (``None``: every page, when no check constrains the label). Kept in the index's cache: the
    uniqueness steps solve the same clue sets again (one clue added, dropped, or alone)."""
    checks, labels = list(checks), list(labels)
    key = "solve:" + json.dumps([checks, labels, max_rounds], sort_keys=True)
    found = index.cache.get(key)
    if found is None:
        found = index.cache[key] = _solve(index, checks, labels, max_rounds)
    return dict(found)


def _solve(index: CorpusIndex, checks: list[Mapping[str, Any]], labels: list[str], max_rounds: int) -> ArrayDomains:
    doms: ArrayDomains = {label: None for label in labels}
    excluded: dict[str, list[np.ndarray]] = {}
    for check in checks:
        if check["type"] in UNARY:
            label, pages = check["node"], unary_pages(index, check)
            doms.setdefault(label, None)
            if check["type"] in EXCLUDING:
                excluded.setdefault(label, []).append(pages)
            else:
                doms[label] = pages if doms[label] is None else intersect(doms[label], pages)
    for label, pages in excluded.items():
        dom = np.arange(len(index)) if doms[label] is None else doms[label]
        for p in pages:
            dom = difference(dom, p)
        doms[label] = dom
    binary = [c for c in checks if c["type"] in BINARY]
    for c in binary:
        for label in check_labels(c):
            doms.setdefault(label, None)
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


def solve(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
          max_rounds: int = 50) -> Domains:
    """Arc-consistent candidate sets (page ids) for every label under ``checks``."""
    doms = solve_arrays(index, checks, labels, max_rounds)
    return {label: set(range(len(index))) if dom is None else set(dom.tolist()) for label, dom in doms.items()}


def candidate_pages(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
                    target_label: str = "X") -> np.ndarray:
    """The answer's candidate pages, a sorted array."""
    dom = solve_arrays(index, checks, labels)[target_label]
    return np.arange(len(index)) if dom is None else dom


def count_candidates(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
          target_label: str = "X") -> int:
    """How many candidate pages the answer has."""
    dom = solve_arrays(index, checks, labels)[target_label]
    return len(index) if dom is None else len(dom)


def candidates(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str],
               target_label: str = "X") -> set[int]:
    """The answer's candidate pages."""
    return set(candidate_pages(index, checks, labels, target_label).tolist())


def only(index: CorpusIndex, checks: Iterable[Mapping[str, Any]], labels: Iterable[str], page: int | None,
         target_label: str = "X") -> bool:
    """Whether ``page`` is the answer's one candidate (``candidates(...) == {page}``)."""
    pages = candidate_pages(index, checks, labels, target_label)
    return len(pages) == 1 and page is not None and int(pages[0]) == page


def satisfied_by(index: CorpusIndex, check: Mapping[str, Any], assignment: Mapping[str, str]) -> bool:
    """Whether the true titles (label -> title) satisfy one check."""
    ids = {label: index.ids.get(title) for label, title in assignment.items()}
    if any(ids.get(label) is None for label in check_labels(check)):
        return False
    if check["type"] in UNARY:
        found = contains(unary_pages(index, check), ids[check["node"]])
        return not found if check["type"] in EXCLUDING else found
    doms: ArrayDomains = {label: np.asarray([ids[label]], np.int64) for label in check_labels(check)}
    _revise(index, check, doms)
    return all(len(doms[label]) for label in doms)


def linked_size(index: CorpusIndex) -> int:
    """How many pages have a link (what a link check allows alone)."""
    return len(_arrays(index)["linked"])
