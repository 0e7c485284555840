"""Subgraph enumeration (ESU), isomorphism classes and random-walk sampling, against known counts."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest

from sailorfog.esu import esu
from sailorfog.sampling import IsoClasses, MaskClassifier, Subgraph, sample_subgraphs, wl_hash

# Connected graphs on k unlabeled nodes (OEIS A001349).
CONNECTED_CLASSES = {1: 1, 2: 1, 3: 2, 4: 6, 5: 21, 6: 112, 7: 853}


def atlas(k: int) -> list[nx.Graph]:
    return [g for g in nx.graph_atlas_g() if g.number_of_nodes() == k and g.number_of_nodes() and nx.is_connected(g)]


def all_small_graphs_union(max_k: int = 5) -> nx.Graph:
    """Disjoint union of every connected graph on 3..max_k nodes: every class occurs."""
    return nx.disjoint_union_all([g for k in range(3, max_k + 1) for g in atlas(k)])


def brute_force(G: nx.Graph, k: int) -> set[frozenset]:
    return {frozenset(c) for c in itertools.combinations(G, k) if nx.is_connected(G.subgraph(c))}


@pytest.mark.parametrize("G", [nx.complete_graph(6), nx.petersen_graph(), nx.gnp_random_graph(13, 0.3, seed=2),
                               nx.path_graph(7), nx.star_graph(6)])
def test_esu_finds_every_connected_set_once(G):
    for k in range(1, 6):
        found = list(esu(G, k, k))
        assert len(found) == len(set(map(frozenset, found)))
        assert set(map(frozenset, found)) == brute_force(G, k)
    assert len(list(esu(G, 4))) == sum(len(brute_force(G, k)) for k in range(1, 5))


def test_atlas_gives_the_known_class_counts_and_wl_alone_does_not():
    for k in range(1, 8):
        classes = IsoClasses()
        for g in atlas(k):
            assert classes.classify(g)[1]  # every atlas graph is its own class
        assert len(classes) == CONNECTED_CLASSES[k]
    # WL cannot tell K3,3 from the triangular prism: the exact check is what separates them
    k33, prism = nx.complete_bipartite_graph(3, 3), nx.circular_ladder_graph(3)
    assert wl_hash(k33) == wl_hash(prism) and not nx.is_isomorphic(k33, prism)
    classes = IsoClasses()
    (a, new_a), (b, new_b) = classes.classify(k33), classes.classify(prism)
    assert new_a and new_b and a != b and b == f"{a}-1"
    assert classes.classify(nx.relabel_nodes(prism, {i: f"n{i}" for i in range(6)})) == (b, False)
    assert len({wl_hash(g) for g in atlas(6)}) < CONNECTED_CLASSES[6]


def test_mask_classifier_agrees_with_exact_classes():
    G = all_small_graphs_union(5)
    mc = MaskClassifier({u: set(v) for u, v in G.adj.items()})
    by_k: dict[int, set[str]] = {}
    for nodes in esu(G, 5, 3):
        by_k.setdefault(len(nodes), set()).add(mc.classify(nodes)[0])
    assert {k: len(v) for k, v in by_k.items()} == {3: 2, 4: 6, 5: 21}


def _check_subgraph(G: nx.Graph, s: Subgraph, lo: int, hi: int) -> None:
    assert lo <= len(s.nodes) <= hi and len(set(s.nodes)) == len(s.nodes)
    H = G.subgraph(s.nodes)
    assert nx.is_connected(H)
    assert {frozenset(e) for e in s.edges} == {frozenset(e) for e in H.edges()}  # induced


def test_sampling_finds_every_class_and_keeps_them_distinct():
    G = all_small_graphs_union(5)
    subs = sample_subgraphs(G, 100, min_nodes=3, max_nodes=5, seed=1, max_walks=20_000)
    assert len(subs) == 29  # 2 + 6 + 21: all classes, nothing twice
    for s in subs:
        _check_subgraph(G, s, 3, 5)
    graphs = [s.graph() for s in subs]
    assert not any(nx.is_isomorphic(a, b) for a, b in itertools.combinations(graphs, 2))
    assert len({s.wl_hash for s in subs}) == 29


def test_sampling_defaults_reproducibility_and_per_class():
    G = nx.gnp_random_graph(40, 0.15, seed=3)
    subs = sample_subgraphs(G, 30, seed=7)
    assert subs == sample_subgraphs(G, 30, seed=7) and subs != sample_subgraphs(G, 30, seed=8)
    assert len(subs) == 30
    for s in subs:
        _check_subgraph(G, s, 3, 7)
    many = sample_subgraphs(G, 60, min_nodes=3, max_nodes=3, seed=0, per_class=10)
    counts = {h: sum(s.wl_hash == h for s in many) for h in {s.wl_hash for s in many}}
    assert len(counts) == 2 and all(c <= 10 for c in counts.values())  # path and triangle only
    assert len({frozenset(s.nodes) for s in many}) == len(many)


def test_sampling_edge_cases():
    assert sample_subgraphs(nx.Graph(), 5) == []
    pairs = nx.Graph([(0, 1), (2, 3)])
    assert sample_subgraphs(pairs, 5) == []  # no connected piece of 3 nodes
    tiny = nx.path_graph(4)
    subs = sample_subgraphs(tiny, 10, min_nodes=3, max_nodes=7)
    assert {len(s.nodes) for s in subs} <= {3, 4} and len(subs) == 2  # P3 and P4 only
    with pytest.raises(ValueError, match="min_nodes"):
        sample_subgraphs(tiny, 3, min_nodes=5, max_nodes=3)
    with pytest.raises(ValueError, match="per_class"):
        sample_subgraphs(tiny, 3, per_class=0)
