"""Exhaustive enumeration of connected induced subgraphs: the ESU algorithm (Wernicke 2006).

The baseline the random-walk sampler is measured against (``benchmarks/subgraph_coverage.py``)
and the ground truth of the tests. Every connected node set of at most ``max_nodes`` nodes
is produced exactly once: a set is grown only from its lowest-numbered node, and only by
nodes numbered higher than that root that are in the exclusive neighbourhood of the node
just added (neighbours of no earlier member), so no set is reached twice.
"""

from __future__ import annotations

from typing import Hashable, Iterator

import networkx as nx


def esu(G: nx.Graph, max_nodes: int, min_nodes: int = 1) -> Iterator[tuple]:
    """Every connected induced subgraph's node tuple with ``min_nodes..max_nodes`` nodes, once each."""
    if not 1 <= min_nodes <= max_nodes:
        raise ValueError(f"expected 1 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}")
    index = {v: i for i, v in enumerate(G)}
    adj = {v: set(G.adj[v]) for v in G}
    for v in G:
        iv = index[v]
        ext = [u for u in adj[v] if index[u] > iv]
        yield from _extend((v,), ext, iv, adj[v] | {v}, adj, index, min_nodes, max_nodes)


def _extend(sub: tuple, ext: list, root: int, nbhd: set, adj: dict[Hashable, set], index: dict[Hashable, int],
            min_nodes: int, max_nodes: int) -> Iterator[tuple]:
    if len(sub) >= min_nodes:
        yield sub
    if len(sub) == max_nodes:
        return
    ext = list(ext)
    while ext:
        w = ext.pop()
        new_ext = ext + [u for u in adj[w] if u not in nbhd and index[u] > root]
        yield from _extend(sub + (w,), new_ext, root, nbhd | adj[w], adj, index, min_nodes, max_nodes)
