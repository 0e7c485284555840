"""Automorphism orbits of hand-built graphs, canonical orbit order, and target choice across roles."""

from __future__ import annotations

import random
from collections import Counter

import networkx as nx
import pytest

from sailorfog.orbits import automorphism_orbits, choose_target, orbit_role, target_distribution
from sailorfog.sampling import Subgraph, wl_hash


def orbit_sets(G: nx.Graph) -> set[frozenset]:
    return set(automorphism_orbits(G))


@pytest.mark.parametrize("G, expected", [
    (nx.path_graph(5), {frozenset({0, 4}), frozenset({1, 3}), frozenset({2})}),
    (nx.star_graph(4), {frozenset({0}), frozenset({1, 2, 3, 4})}),
    (nx.cycle_graph(6), {frozenset(range(6))}),
    (nx.complete_bipartite_graph(3, 3), {frozenset(range(6))}),
    (nx.complete_bipartite_graph(2, 3), {frozenset({0, 1}), frozenset({2, 3, 4})}),
    # paw: triangle 0-1-2 with a pendant 3 on node 0
    (nx.Graph([(0, 1), (1, 2), (2, 0), (0, 3)]), {frozenset({0}), frozenset({3}), frozenset({1, 2})}),
    # a tree with no symmetry but the two leaves on node 1: 0-1, 1-2, 1-3, 0-4, 4-5
    (nx.Graph([(0, 1), (1, 2), (1, 3), (0, 4), (4, 5)]),
     {frozenset({0}), frozenset({1}), frozenset({2, 3}), frozenset({4}), frozenset({5})}),
])
def test_orbits_of_known_graphs(G, expected):
    assert orbit_sets(G) == expected


def test_orbit_order_is_canonical_across_relabelings():
    G = nx.Graph([(0, 1), (1, 2), (1, 3), (0, 4), (4, 5), (2, 3)])
    base = automorphism_orbits(G)
    rng = random.Random(0)
    for _ in range(5):
        names = [f"x{i}" for i in range(6)]
        rng.shuffle(names)
        mapping = dict(zip(G, names))
        H = nx.relabel_nodes(G, mapping)
        H = nx.Graph(sorted(H.edges(), key=lambda e: rng.random()))  # another insertion order too
        assert automorphism_orbits(H) == [frozenset(mapping[n] for n in o) for o in base]


def _subgraph(G: nx.Graph, names: list[str]) -> Subgraph:
    H = nx.relabel_nodes(G, dict(zip(G, names)))
    return Subgraph(tuple(H), tuple(H.edges()), wl_hash(H))


def test_choose_target_spreads_over_orbits_and_prefers_rich_nodes():
    star = nx.star_graph(3)
    G = nx.Graph()
    counts: Counter = Counter()
    rng = random.Random(0)
    picks = []
    for i in range(6):
        names = [f"hub{i}", f"a{i}", f"b{i}", f"c{i}"]
        for n in names:
            G.add_node(n, features={"num_facts": 5 if n == f"b{i}" else 0, "num_dates": 0, "num_numbers": 0})
        node, orbit = choose_target(_subgraph(star, names), G, counts, rng)
        picks.append((node, orbit))
    orbits = [o for _, o in picks]
    assert Counter(orbits) == {0: 3, 1: 3}  # center and leaves take turns
    leaves = [n for n, o in picks if not n.startswith("hub")]
    assert leaves and all(n.startswith("b") for n in leaves)  # the leaf with facts
    h = wl_hash(star)
    assert counts[h] == 6 and counts[(h, 0)] == counts[(h, 1)] == 3


def test_choose_target_uses_least_used_role_across_classes():
    star = nx.star_graph(3)  # orbits: center (role d3e1), leaves (role d1e2)
    for used_role, expected in (("d1e2", "d3e1"), ("d3e1", "d1e2")):
        counts: Counter = Counter({("role", used_role): 1})  # another class used this role already
        for seed in range(5):
            c = Counter(counts)
            _, orbit = choose_target(_subgraph(star, ["s", "t", "u", "v"]), nx.Graph(), c, random.Random(seed))
            assert orbit_role(star, automorphism_orbits(star)[orbit]) == expected
            assert c[("role", expected)] == 1


def test_target_distribution_numbers():
    choices = [("A", 0), ("A", 1), ("A", 0), ("A", 1), ("B", 0)]
    d = target_distribution(choices, orbit_counts={"A": 2, "B": 3}, roles=["x", "y", "x", "y", "x"])
    assert d["targets"] == 5 and d["classes"] == 2 and d["per_class"] == {"A": 4, "B": 1}
    assert d["per_orbit"] == {"A#0": 2, "A#1": 2, "B#0": 1}
    assert d["mean_orbit_evenness"] == 1.0  # A split evenly; B (one target) left out
    assert d["class_evenness"] == pytest.approx(0.7219, abs=1e-4)  # H(4/5, 1/5) / ln 2
    assert d["per_role"] == {"x": 3, "y": 2}
    skewed = target_distribution([("A", 0)] * 4, orbit_counts={"A": 2})
    assert skewed["mean_orbit_evenness"] == 0.0
