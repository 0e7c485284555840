"""Page sets as sorted arrays, the byte-bounded cache, and the solver's answers over them."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from sailorfog import constraints
from sailorfog.constraints import candidates, count_candidates, solve, unary_pages
from sailorfog.corpus import index_from_sim
from sailorfog.corpus_index import DiskCorpusIndex, open_corpus_index
from sailorfog.pagesets import (ByteLRU, as_pages, contains, dedupe_sorted, difference, distinct, intersect,
                                isin_sorted, size_of)
from wiki_sim import WikiSim


def test_set_algebra_matches_python_sets():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.choice([5, 50, 2000])
        a = set(rng.sample(range(n), rng.randint(0, n // 2)))
        b = set(rng.sample(range(n), rng.randint(0, n)))
        x, y = as_pages(a), as_pages(np.asarray(list(b), np.uint32))
        assert intersect(x, y).tolist() == sorted(a & b) == intersect(y, x).tolist()
        assert difference(x, y).tolist() == sorted(a - b)
        assert isin_sorted(y, x).tolist() == [v in a for v in y.tolist()]
        probe = rng.randrange(n)
        assert contains(x, probe) == (probe in a) and not contains(x, None)
        values = np.asarray([rng.randrange(n) for _ in range(rng.randint(0, 3 * n))], np.int64)
        assert distinct(values, n).tolist() == sorted(set(values.tolist()))
        assert dedupe_sorted(np.sort(values)).tolist() == sorted(set(values.tolist()))


def test_the_cache_holds_at_most_its_bytes_and_drops_the_least_recently_used():
    cache = ByteLRU(64 << 10)
    value = np.arange(1000, dtype=np.int64)  # about 8 KB each
    for i in range(100):
        cache[f"k{i}"] = value.copy()
        cache.get("k0")  # read again and again: kept
        assert cache.nbytes <= cache.max_bytes
    assert 0 < len(cache) < 100 and "k0" in cache and "k1" not in cache and "k99" in cache
    assert cache.nbytes == sum(size_of(cache[k]) + sys.getsizeof(k) for k in list(cache._items))
    cache["huge"] = np.zeros(1 << 20)  # larger than the bound alone: not kept, nothing evicted for it
    assert "huge" not in cache and "k99" in cache
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    with pytest.raises(ValueError, match="max_bytes must be >= 0"):
        ByteLRU(-1)


@pytest.fixture(scope="module")
def indexes(toy_wiki):
    with WikiSim(toy_wiki) as sim:
        memory = index_from_sim(sim)
        disk = open_corpus_index(sim)
    return memory, disk


def _random_checks(index, rng):
    titles = [index.titles[p] for p in range(len(index))]
    title = rng.choice(titles)
    pid = index.ids[title]
    checks = []
    kind = index.page_type[pid]
    if kind:
        checks.append({"type": "type", "node": "X", "words": list(kind[-1:])})
    checks.append(rng.choice([{"type": "prefix", "node": "X", "prefix": title[:1]},
                              {"type": "name_words", "node": "X", "n": len(title.split())},
                              {"type": "year", "node": "X", "lo": 1800, "hi": 2000},
                              {"type": "not_prefix", "node": "X", "prefix": rng.choice(titles)[:2]}]))
    checks.append({"type": "link", "a": "X", "b": "B"})
    if rng.random() < 0.5:
        checks.append({"type": "year", "node": "B", "lo": rng.randint(1700, 1950), "hi": 2020})
    if rng.random() < 0.5:
        checks.append({"type": "relyear", "node": "X", "ref": "B", "lo": -80, "hi": 80})
    if rng.random() < 0.5:
        checks.append({"type": "earlier", "node": "B", "other": "X"})
    if rng.random() < 0.3:
        checks.append({"type": "not_title", "node": "B", "title": rng.choice(titles)})
    return checks


def _reference(index, checks, labels):
    """Arc consistency over Python sets, per page (what the solver computed before arrays)."""
    every = set(range(len(index)))
    doms = {label: set(every) for label in labels}
    for c in checks:
        if c["type"] in constraints.UNARY:
            doms.setdefault(c["node"], set(every))
            doms[c["node"]] &= constraints.unary_candidates(index, c)
    changed = True
    while changed:
        changed = False
        for c in checks:
            if c["type"] == "link":
                pairs = [(c["a"], c["b"]), (c["b"], c["a"])]
                for x, y in pairs:
                    new = {p for p in doms[x] if index.neighbors[p] & doms[y]}
                    changed |= new != doms[x]
                    doms[x] = new
            elif c["type"] == "relyear":
                n, r = c["node"], c["ref"]
                new_n = {p for p in doms[n] if any(c["lo"] <= y - z <= c["hi"] for y in index.page_years[p]
                                                   for q in doms[r] for z in index.page_years[q])}
                new_r = {q for q in doms[r] if any(c["lo"] <= y - z <= c["hi"] for z in index.page_years[q]
                                                   for p in doms[n] for y in index.page_years[p])}
                changed |= new_n != doms[n] or new_r != doms[r]
                doms[n], doms[r] = new_n, new_r
            elif c["type"] == "earlier":
                n, o = c["node"], c["other"]
                mins = index.page_min_year
                o_max = max((mins[p] for p in doms[o] if mins[p] is not None), default=None)
                n_min = min((mins[p] for p in doms[n] if mins[p] is not None), default=None)
                new_n = {p for p in doms[n] if o_max is not None and mins[p] is not None and mins[p] < o_max}
                new_o = {p for p in doms[o] if n_min is not None and mins[p] is not None and mins[p] > n_min}
                changed |= new_n != doms[n] or new_o != doms[o]
                doms[n], doms[o] = new_n, new_o
    return doms


def test_the_solver_matches_per_page_arc_consistency_on_both_indexes(indexes):
    memory, disk = indexes
    rng = random.Random(3)
    for _ in range(60):
        checks = _random_checks(memory, rng)
        want = _reference(memory, checks, ["X", "B"])
        for index in (memory, disk):
            assert solve(index, checks, ["X", "B"]) == want
            assert candidates(index, checks, ["X", "B"]) == want["X"]
            assert count_candidates(index, checks, ["X", "B"]) == len(want["X"])


def test_a_small_cache_bound_gives_the_same_answers(toy_wiki, indexes):
    memory, disk = indexes
    small = DiskCorpusIndex(disk.path, cache_bytes=2048)
    rng = random.Random(5)
    for _ in range(80):
        checks = _random_checks(memory, rng)
        assert candidates(small, checks, ["X", "B"]) == candidates(disk, checks, ["X", "B"])
        assert small.cache.nbytes <= 2048
    for check in ({"type": "person", "node": "X"}, {"type": "year", "node": "B", "lo": 1, "hi": 3000}):
        assert set(unary_pages(small, check).tolist()) == constraints.unary_candidates(memory, check)
