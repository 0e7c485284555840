"""Structurally distinct connected subgraphs of the entity graph, sampled by random walks.

A sample grows a node set from a random start by a random walk that may jump back to any
node already visited (so it reaches stars and branches, not only paths), until it has
``k`` nodes (``k`` uniform in ``[min_nodes, max_nodes]``); the subgraph is the one these
nodes induce. Samples are kept only if structurally new: the Weisfeiler-Leman hash
(networkx) sorts them into buckets and an exact isomorphism test decides within a
bucket (WL cannot tell some regular graphs apart, e.g. K3,3 from the triangular prism).
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from typing import Hashable, Iterator

import networkx as nx

WL_ITERATIONS = 3


@dataclass(frozen=True)
class Subgraph:
    """One sampled connected induced subgraph."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    wl_hash: str
    """The isomorphism class: the WL hash, with ``-N`` appended for the N-th further class
    that shares it (non-isomorphic graphs the WL test cannot separate)."""

    def graph(self) -> nx.Graph:
        H = nx.Graph()
        H.add_nodes_from(self.nodes)
        H.add_edges_from(self.edges)
        return H


def wl_hash(H: nx.Graph) -> str:
    """Weisfeiler-Leman hash of a graph's structure (node names ignored)."""
    with warnings.catch_warnings():  # networkx 3.5+ notes its hashes changed; ours are never compared across versions
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(H, iterations=WL_ITERATIONS)


class IsoClasses:
    """Isomorphism classes seen so far: WL hash buckets, exact isomorphism within a bucket."""

    def __init__(self) -> None:
        self._buckets: dict[str, list[nx.Graph]] = {}
        self.isomorphism_checks = 0

    def classify(self, H: nx.Graph) -> tuple[str, bool]:
        """``(class id, is_new)`` of ``H``."""
        h = wl_hash(H)
        bucket = self._buckets.setdefault(h, [])
        for i, rep in enumerate(bucket):
            self.isomorphism_checks += 1
            if nx.is_isomorphic(H, rep):
                return (h if i == 0 else f"{h}-{i}"), False
        bucket.append(H)
        i = len(bucket) - 1
        return (h if i == 0 else f"{h}-{i}"), True

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets.values())


class MaskClassifier:
    """Isomorphism classes of small node sets, memoized on their ordered adjacency bit mask.

    A node list's mask (bit ``(i, j)`` set when its ``i``-th and ``j``-th nodes are
    adjacent) determines the induced subgraph up to relabelling, so each distinct mask is
    classified once by :class:`IsoClasses` and then looked up: at most ``2^(k(k-1)/2)``
    masks for ``k`` nodes, far fewer in practice.
    """

    def __init__(self, adj: dict[Hashable, set]):
        self.adj = adj
        self.classes = IsoClasses()
        self._memo: dict[tuple[int, int], str] = {}
        self.found: set[str] = set()

    def mask(self, nodes: list | tuple) -> int:
        adj, m, bit, k = self.adj, 0, 0, len(nodes)
        for i in range(k):
            near = adj[nodes[i]]
            for j in range(i + 1, k):
                if nodes[j] in near:
                    m |= 1 << bit
                bit += 1
        return m

    def classify(self, nodes: list | tuple) -> tuple[str, bool]:
        """``(class id, is_new)``: whether this class is seen for the first time."""
        key = (len(nodes), self.mask(nodes))
        cls = self._memo.get(key)
        if cls is None:
            cls, _ = self.classes.classify(graph_of_mask(*key))
            self._memo[key] = cls
        is_new = cls not in self.found
        self.found.add(cls)
        return cls, is_new


def graph_of_mask(k: int, mask: int) -> nx.Graph:
    """The graph on nodes ``0..k-1`` whose pair ``(i, j)`` (in row order) is an edge when its bit is set."""
    H = nx.Graph()
    H.add_nodes_from(range(k))
    bit = 0
    for i in range(k):
        for j in range(i + 1, k):
            if mask >> bit & 1:
                H.add_edge(i, j)
            bit += 1
    return H


def random_walk_nodes(adj: dict[Hashable, list], k: int, rng: random.Random, start: Hashable,
                      max_steps: int | None = None, jump: bool = True) -> list | None:
    """``k`` nodes reached from ``start`` by one random walk (``adj``: node -> list of
    neighbors), or ``None`` when the walk's component is smaller than ``k`` or ``max_steps``
    (default ``20 * k``) ran out. ``jump``: each step leaves from a random visited node
    (so stars and branches are reached); ``False``: a plain walk from the last node."""
    visited = [start]
    seen = {start}
    steps = 0
    limit = max_steps if max_steps is not None else 20 * k
    current = start
    while len(visited) < k and steps < limit:
        steps += 1
        if jump:
            current = visited[rng.randrange(len(visited))]
        neighbors = adj[current]
        if neighbors:
            nxt = neighbors[rng.randrange(len(neighbors))]
            current = nxt
            if nxt not in seen:
                seen.add(nxt)
                visited.append(nxt)
    return visited if len(visited) == k else None


def iter_walk_samples(G: nx.Graph, min_nodes: int, max_nodes: int, rng: random.Random,
                      jump: bool = True) -> Iterator[list | None]:
    """Endless node sets from random walks (sizes uniform in ``[min_nodes, max_nodes]``, starts
    uniform); ``None`` for a walk that could not reach its size (so callers can count it)."""
    if G.number_of_nodes() == 0:
        return
    adj = {u: list(nbrs) for u, nbrs in G.adj.items()}
    nodes = list(adj)
    while True:
        k = rng.randint(min_nodes, max_nodes)
        yield random_walk_nodes(adj, k, rng, nodes[rng.randrange(len(nodes))], jump=jump)


def _subgraph(G: nx.Graph, nodes: list) -> nx.Graph:
    H = nx.Graph()
    H.add_nodes_from(nodes)
    H.add_edges_from((u, v) for i, u in enumerate(nodes) for v in nodes[i + 1:] if v in G.adj[u])
    return H


def sample_subgraphs(G: nx.Graph, n: int, min_nodes: int = 3, max_nodes: int = 7, seed: int = 0,
                     per_class: int = 1, max_walks: int | None = None) -> list[Subgraph]:
    """Up to ``n`` connected induced subgraphs of ``G`` with ``min_nodes..max_nodes`` nodes,
    at most ``per_class`` of each isomorphism class (default 1: structurally distinct).

    Stops after ``max_walks`` random walks (default ``200 * n``); a graph with no connected
    piece of ``min_nodes`` nodes gives ``[]``.
    """
    if not 1 <= min_nodes <= max_nodes:
        raise ValueError(f"expected 1 <= min_nodes <= max_nodes, got min_nodes={min_nodes}, max_nodes={max_nodes}")
    if n < 0 or per_class < 1:
        raise ValueError(f"expected n >= 0 and per_class >= 1, got n={n}, per_class={per_class}")
    largest = max((len(c) for c in nx.connected_components(G)), default=0)
    if n == 0 or largest < min_nodes:
        return []
    max_nodes = min(max_nodes, largest)
    rng = random.Random(seed)
    classes = MaskClassifier({u: set(nbrs) for u, nbrs in G.adj.items()})
    counts: dict[str, int] = {}
    seen_sets: set[frozenset] = set()
    out: list[Subgraph] = []
    walks = max_walks if max_walks is not None else 200 * n
    for i, nodes in enumerate(iter_walk_samples(G, min_nodes, max_nodes, rng)):
        if i >= walks or len(out) >= n:
            break
        if nodes is None:
            continue
        key = frozenset(nodes)
        if key in seen_sets:
            continue
        seen_sets.add(key)
        cls, _ = classes.classify(nodes)
        if counts.get(cls, 0) >= per_class:
            continue
        counts[cls] = counts.get(cls, 0) + 1
        H = _subgraph(G, nodes)
        out.append(Subgraph(tuple(nodes), tuple(H.edges()), cls))
    return out
