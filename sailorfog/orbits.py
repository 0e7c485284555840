"""Structural roles in a sampled subgraph (automorphism orbits) and answer-node choice across them.

Two nodes are in one orbit when an automorphism of the subgraph maps one to the other: the
center and the leaves of a star, the ends and the middle of a path. Choosing the answer
node from orbits that have been used least (per topology class) spreads questions over
structural roles instead of always asking about, say, a leaf.

Orbits are ordered canonically, so ``orbit_index`` names the same role in every subgraph
of one topology class: by the nodes' Weisfeiler-Leman colours (networkx
``weisfeiler_lehman_subgraph_hashes``, equal for automorphic nodes), then orbit size.
Distinct orbits WL cannot tell apart (only in graphs like K3,3 vs the prism) keep the
order of their first node.
"""

from __future__ import annotations

import random
import warnings
from collections import Counter
from typing import Any, Hashable, Mapping

import networkx as nx
from networkx.algorithms.isomorphism import GraphMatcher

from sailorfog.sampling import WL_ITERATIONS, Subgraph

MAX_AUTOMORPHISMS = 50_000
"""Enumerating automorphisms stops here (a 7-node graph has at most 7! = 5040)."""


def _node_colours(G: nx.Graph) -> dict[Hashable, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        hashes = nx.weisfeiler_lehman_subgraph_hashes(G, iterations=WL_ITERATIONS)
    return {n: "/".join(h) for n, h in hashes.items()}


def automorphism_orbits(G: nx.Graph) -> list[frozenset]:
    """The automorphism orbits of ``G``'s nodes, in canonical order (see the module docstring)."""
    parent = {n: n for n in G}

    def find(x: Hashable) -> Hashable:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, mapping in enumerate(GraphMatcher(G, G).isomorphisms_iter()):
        for a, b in mapping.items():
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
        if i >= MAX_AUTOMORPHISMS:
            break
    groups: dict[Hashable, list] = {}
    for n in G:
        groups.setdefault(find(n), []).append(n)
    colours = _node_colours(G)
    order = {n: i for i, n in enumerate(G)}
    orbits = sorted(groups.values(), key=lambda ns: (colours[ns[0]], len(ns), min(order[n] for n in ns)))
    return [frozenset(ns) for ns in orbits]


def orbit_role(H: nx.Graph, orbit: frozenset) -> str:
    """A role name comparable across topology classes: degree and eccentricity of the
    orbit's nodes (``d1e3``: a leaf three hops from the far end)."""
    n = next(iter(orbit))
    return f"d{H.degree(n)}e{nx.eccentricity(H, n)}"


def choose_target(subgraph: Subgraph, G: nx.Graph, counts: Counter, rng: random.Random) -> tuple[str, int]:
    """The answer node for ``subgraph`` and its orbit's index, chosen so targets spread over roles.

    ``counts`` (updated here) holds how many targets went to each ``(wl_hash, orbit_index)``,
    each ``wl_hash`` and each ``("role", role)`` (:func:`orbit_role`) so far. The orbit
    used least in this topology class is chosen; ties go to the role used least over all
    classes (so one subgraph per class still spreads over leaves, hubs, middles), then at
    random. Within the orbit, the node with the most facts, dates and numbers in ``G``
    (what clues are written from) is taken, ties at random.
    """
    H = subgraph.graph()
    orbits = automorphism_orbits(H)
    roles = [orbit_role(H, o) for o in orbits]
    key = [(counts.get((subgraph.wl_hash, i), 0), counts.get(("role", roles[i]), 0)) for i in range(len(orbits))]
    fewest = min(key)
    index = rng.choice([i for i, k in enumerate(key) if k == fewest])

    def richness(n: str) -> int:
        f = G.nodes[n].get("features", {}) if n in G else {}
        return f.get("num_facts", 0) + f.get("num_dates", 0) + f.get("num_numbers", 0)

    members = sorted(orbits[index], key=str)
    best = max(richness(n) for n in members)
    node = rng.choice([n for n in members if richness(n) == best])
    counts[(subgraph.wl_hash, index)] += 1
    counts[subgraph.wl_hash] += 1
    counts[("role", roles[index])] += 1
    return node, index


def target_distribution(choices: list[tuple[str, int]], orbit_counts: Mapping[str, int] | None = None,
                        roles: list[str] | None = None) -> dict[str, Any]:
    """How chosen targets spread: ``choices`` are ``(wl_hash, orbit_index)`` pairs, ``roles``
    (optional) the :func:`orbit_role` of each.

    Reports targets per topology class, per (class, orbit), per role, and how even they
    are: normalized entropy over classes, over each class's orbits (1.0 = perfectly even;
    ``orbit_counts`` gives each class's number of orbits, so unused orbits count as zeros;
    classes with one target are left out of that mean), and over roles.
    """
    by_class = Counter(c for c, _ in choices)
    by_orbit = Counter(choices)
    per_class_evenness = {}
    for cls, n in by_class.items():
        if n < 2:
            continue
        k = (orbit_counts or {}).get(cls) or 1 + max(i for c, i in by_orbit if c == cls)
        per_class_evenness[cls] = _evenness([by_orbit.get((cls, i), 0) for i in range(k)])
    return {
        "targets": len(choices),
        "classes": len(by_class),
        "per_class": dict(sorted(by_class.items())),
        "per_orbit": {f"{c}#{i}": n for (c, i), n in sorted(by_orbit.items())},
        "class_evenness": round(_evenness(list(by_class.values())), 4),
        "mean_orbit_evenness": round(sum(per_class_evenness.values()) / len(per_class_evenness), 4)
        if per_class_evenness else None,
        "per_role": dict(sorted(Counter(roles).items())) if roles else {},
        "role_evenness": round(_evenness(list(Counter(roles).values())), 4) if roles else None,
    }


def _evenness(counts: list[int]) -> float:
    """Shannon entropy of ``counts`` over log(len): 1.0 when all equal, 0.0 when one holds everything."""
    import math

    total = sum(counts)
    if total == 0:
        return 0.0
    if len(counts) < 2:
        return 1.0
    h = -sum(c / total * math.log(c / total) for c in counts if c)
    return h / math.log(len(counts))
