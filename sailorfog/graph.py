"""The entity graph SailorFog-QA-V2 questions are sampled from.

:func:`build_graph` starts from obscure seed pages (few inbound links, short pages) and
explores with the agent's own tools (:mod:`sailorfog.explore`): each page read gives
related entities (links, infobox values that are pages, names the search links to pages),
facts, and dated and numeric statements. Each new entity is looked up by a search query,
recorded as its provenance with the URL it was found from. Besides this outward
expansion (``expansion="outward"``: a forest, one discovery edge per node), the default
``"dense"`` build adds what relates entities already in the graph: links between them,
infobox facts pointing at each other, shared facts, and bridge pages linked from several
nodes; the graph then has cycles (:func:`graph_metrics`).

Node key: canonical page title. Node and edge attributes are those :func:`save_graph` writes (networkx
node-link JSON, described in docs/synthesis.md); a seed's provenance is ``{"query": "", "url": its own URL}``.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import networkx as nx

from sailorfog.explore import Explorer, Found, LinkRead, PageRead, SimExplorer, name_query
from sailorfog.extract import extract_statements
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import atomic_open
from wiki_sim.records import PageInfo, title_to_url
from wiki_sim.sentences import locate_anchors

Expansion = Literal["dense", "outward"]
# Fact keys whose shared values say nothing about a relation (a year of an estimate, a hemisphere, a trend).
_UNRELATING_KEY = re.compile(r"year|date|change|rank|latns|longew|_ref|note|footnote|magnitude|percent|_system|"
                             r"^topic$|cat$|type$", re.I)
_UNRELATING_VALUE = frozenset("increase decrease steady yes no none unknown n/a".split())


@dataclass
class GraphConfig:
    """How :func:`build_graph` chooses seeds and explores."""

    max_nodes: int = 300
    """Stop once the graph has this many nodes."""
    num_seeds: int = 8
    """Seed entities to start from (ignored when ``seeds`` is given)."""
    seeds: tuple[str, ...] = ()
    """Explicit seed titles or page URLs (each must exist); empty: draw obscure seeds from the corpus."""
    seed_max_inbound: int = 5
    """A seed has at most this many pages linking to it (obscure, not famous)."""
    seed_max_length: int = 4000
    """A seed's page has at most this many characters (short pages are the obscure ones)."""
    seed_min_length: int = 200
    """...and at least this many, so there is something to write clues from."""
    seed_min_links: int = 3
    """A seed links to at least this many pages (so expansion can start)."""
    max_depth: int = 4
    """Discovery depth beyond which nodes are not expanded."""
    branching: int = 4
    """New entities taken from each page read (links and fact targets, obscure ones first)."""
    search_neighbors: int = 1
    """New entities taken per node from searching its name (pages that mention it)."""
    neighbor_max_inbound: int = 150
    """Pages with more inbound links than this (hubs like *Europe*) are not taken as new nodes."""
    expansion: Expansion = "dense"
    """``dense``: also add relations between nodes already in the graph (links, facts, shared
    facts, bridge pages), so the graph has cycles; ``outward``: discovery edges only (a forest)."""
    bridge_fraction: float = 0.15
    """Dense builds keep this share of ``max_nodes`` for bridge pages linked from two or more nodes."""
    shared_fact_max_group: int = 4
    """A fact value shared by more nodes than this (e.g. a broad topic) makes no edges."""
    search_k: int = 10
    """Hits per search query; a node's provenance query must find it among them."""
    lead_chars: int = 600
    """Characters of the page kept as the node's ``lead``."""
    max_text_chars: int = 20_000
    """Characters of a page that statements are extracted from."""
    max_statements: int = 30
    """Dates (and numbers) kept per node."""
    seed: int = 0
    """Random seed; the same seed and corpus give the same graph."""

    def __post_init__(self) -> None:
        positive = ("max_nodes", "num_seeds", "search_k", "lead_chars", "max_text_chars", "max_statements",
                    "shared_fact_max_group")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GraphConfig.{name} must be an integer >= 1, got {value!r}")
        for name in ("seed_max_inbound", "seed_max_length", "seed_min_length", "seed_min_links", "max_depth",
                     "branching", "search_neighbors", "neighbor_max_inbound"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"GraphConfig.{name} must be an integer >= 0, got {value!r}")
        if self.seed_min_length > self.seed_max_length:
            raise ValueError(f"GraphConfig.seed_min_length ({self.seed_min_length}) must be <= seed_max_length "
                             f"({self.seed_max_length})")
        if self.expansion not in ("dense", "outward"):
            raise ValueError(f"GraphConfig.expansion must be 'dense' or 'outward', got {self.expansion!r}")
        if not isinstance(self.bridge_fraction, (int, float)) or not 0.0 <= self.bridge_fraction < 1.0:
            raise ValueError(f"GraphConfig.bridge_fraction must be in [0, 1), got {self.bridge_fraction!r}")
        if isinstance(self.seeds, str) or not all(isinstance(s, str) and s for s in self.seeds):
            raise ValueError(f"GraphConfig.seeds must be a sequence of non-empty titles, got {self.seeds!r}")
        self.seeds = tuple(self.seeds)


class GraphError(UserError):
    """The graph cannot be built (no seed, unknown seed title, ...)."""


@dataclass
class _Builder:
    explorer: Explorer
    config: GraphConfig
    G: nx.Graph = field(default_factory=nx.Graph)
    reads: dict[str, PageRead] = field(default_factory=dict)
    stats: dict[str, PageInfo] = field(default_factory=dict)

    # --- nodes and edges ------------------------------------------------------------
    def inbound(self, title: str) -> int:
        info = self.stats.get(title)
        return info.inbound_links if info else -1

    def add_node(self, read: PageRead, depth: int, query: str, found_at: str) -> None:
        c = self.config
        dates, numbers = extract_statements(read.text, c.max_text_chars, c.max_statements)
        info = self.stats.get(read.title)
        self.G.add_node(read.title, url=read.url, lead=read.text[:c.lead_chars], depth=depth,
                        provenance={"query": query, "url": found_at}, facts=list(read.facts), dates=dates,
                        numbers=numbers,
                        features={"degree": 0, "inbound_links": self.inbound(read.title),
                                  "page_length": info.length if info else len(read.text),
                                  "num_facts": len(read.facts), "num_dates": len(dates),
                                  "num_numbers": len(numbers), "depth": depth})
        self.reads[read.title] = read

    def add_relation(self, a: str, b: str, kind: str, sentence: str, key: str, query: str, url: str) -> bool:
        """Add one piece of evidence relating ``a`` to ``b``; False if the edge already had it."""
        if a == b:
            return False
        rel = {"source": a, "target": b, "kind": kind, "sentence": sentence, "key": key, "query": query, "url": url}
        if not self.G.has_edge(a, b):
            self.G.add_edge(a, b, relations=[rel])
            return True
        rels = self.G.edges[a, b]["relations"]
        if any(r["source"] == a and r["kind"] == kind and r["key"] == key for r in rels):
            return False
        rels.append(rel)
        return True

    # --- discovery ------------------------------------------------------------------
    def find_query(self, title: str) -> tuple[str, list[Found]]:
        """The name query for ``title`` and its hits; the query is "" when it does not find the page."""
        query = name_query(title)
        [hits] = self.explorer.search([query])
        return (query if any(h.title == title for h in hits) else ""), hits

    def read(self, title: str, url: str | None = None) -> PageRead | None:
        if title in self.reads:
            return self.reads[title]
        return self.explorer.read(url or title_to_url(title), f"facts, dates, numbers and related entities of {title}")

    def candidates(self, read: PageRead) -> list[tuple[LinkRead, str, str]]:
        """``(link, kind, key)`` for each new entity the page relates to, obscure ones first."""
        seen: set[str] = set()
        out = []
        fact_links = [(LinkRead(f["target"], f["value"], fact_evidence(f)), "fact", f["key"]) for f in read.facts
                      if f.get("target")]
        for link, kind, key in fact_links + [(x, "link", "") for x in read.links]:
            if link.target in seen or link.target in self.G or link.target == read.title:
                continue
            seen.add(link.target)
            if 0 <= self.config.neighbor_max_inbound < self.inbound(link.target):
                continue
            out.append((link, kind, key))
        out.sort(key=lambda c: max(self.inbound(c[0].target), 0))  # stable: reading order among equals
        return out

    def expand(self, frontier: deque[tuple[str, int]], title: str, depth: int, limit: int,
               rng: random.Random) -> None:
        read = self.reads[title]
        c = self.config
        taken = 0
        pool = self.candidates(read)
        # The most obscure half first, in random order, so seeds do not all grow the same way.
        head = pool[: max(2 * c.branching, 1)]
        rng.shuffle(head)
        for link, kind, key in head + pool[len(head):]:
            if taken >= c.branching or len(self.G) >= limit:
                break
            page = self.read(link.target, link.url or None)
            if page is None or page.title in self.G:  # a redirect or another name of a node
                continue
            query = link.query or self.find_query(page.title)[0]
            self.add_node(page, depth + 1, query, read.url)
            self.add_relation(title, page.title, kind, link.sentence, key, query, read.url)
            frontier.append((page.title, depth + 1))
            taken += 1
        if c.search_neighbors:
            self.expand_by_search(frontier, title, depth, limit)

    def expand_by_search(self, frontier: deque[tuple[str, int]], title: str, depth: int, limit: int) -> None:
        """Pages the search for ``title``'s name finds that link to ``title``: inbound relations."""
        query, hits = self.find_query(title)
        if not query:
            return
        taken = 0
        for hit in hits:
            if taken >= self.config.search_neighbors or len(self.G) >= limit:
                return
            if hit.title in self.G or 0 <= self.config.neighbor_max_inbound < self.inbound(hit.title):
                continue
            page = self.read(hit.title, hit.url)
            evidence = next((x for x in page.links if x.target == title), None) if page else None
            if page is None or evidence is None or page.title in self.G:
                continue
            self.add_node(page, depth + 1, query, hit.url)
            self.add_relation(page.title, title, "link", evidence.sentence, "", query, page.url)
            frontier.append((page.title, depth + 1))
            taken += 1

    # --- densification --------------------------------------------------------------
    def densify(self, limit: int) -> None:
        self.link_existing()
        self.add_bridges(limit)
        self.link_existing()
        if not getattr(self.explorer, "structured_links", False):
            self.link_mentions()
        self.share_facts()

    def link_mentions(self) -> None:
        """Nodes whose read text names another node (for explorers that see text, not links)."""
        from wiki_sim import LinkFinder

        finder = LinkFinder(list(self.G))
        for title in list(self.G):
            read = self.reads[title]
            found = finder.find(read.text, title)
            spans = locate_anchors(read.text, [anchor for _, anchor in found])
            for (target, anchor), (start, end) in zip(found, spans):
                self.add_relation(title, target, "link", read.text[start:end].strip(), "", "", read.url)

    def link_existing(self) -> None:
        """Links and linked facts between nodes already in the graph."""
        for title in list(self.G):
            read = self.reads[title]
            for f in read.facts:
                if f.get("target") in self.G:
                    self.add_relation(title, f["target"], "fact", fact_evidence(f), f["key"], "", read.url)
            for link in read.links:
                if link.target in self.G:
                    self.add_relation(title, link.target, "link", link.sentence, "", link.query, read.url)

    def add_bridges(self, limit: int) -> None:
        """Pages outside the graph that two or more nodes link to: adding one closes a cycle."""
        linked_from: dict[str, list[tuple[str, LinkRead]]] = {}
        for title in self.G:
            for link in self.reads[title].links:
                if link.target not in self.G:
                    sources = linked_from.setdefault(link.target, [])
                    if not sources or sources[-1][0] != title:
                        sources.append((title, link))
        ranked = sorted((t for t, s in linked_from.items() if len(s) >= 2
                         and not 0 <= self.config.neighbor_max_inbound < self.inbound(t)),
                        key=lambda t: (-len(linked_from[t]), max(self.inbound(t), 0), t))
        for target in ranked:
            if len(self.G) >= limit:
                return
            sources = linked_from[target]
            page = self.read(target, sources[0][1].url or None)
            if page is None or page.title in self.G:
                continue
            depth = 1 + min(self.G.nodes[s]["depth"] for s, _ in sources)
            query = self.find_query(page.title)[0]
            self.add_node(page, depth, query, self.G.nodes[sources[0][0]]["url"])
            for source, link in sources:
                self.add_relation(source, page.title, "link", link.sentence, "", query, self.G.nodes[source]["url"])

    def share_facts(self) -> None:
        """Nodes with the same fact (same linked target, or same key and short value) are related."""
        groups: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
        for title in self.G:
            for f in self.reads[title].facts:
                value = " ".join(str(f["value"]).split()).casefold()
                key = ("->", f["target"]) if f.get("target") else (f["key"], value)
                if f.get("target") or _relating(f["key"], value):
                    members = groups.setdefault(key, [])
                    if not members or members[-1][0] != title:
                        members.append((title, f))
        for members in groups.values():
            if not 2 <= len(members) <= self.config.shared_fact_max_group:
                continue
            for i, (a, fa) in enumerate(members):
                for b, fb in members[i + 1:]:
                    sentence = f"{a}: {fa['key']} = {fa['value']}; {b}: {fb['key']} = {fb['value']}"
                    self.add_relation(a, b, "shared_fact", sentence, fa["key"], "", self.G.nodes[a]["url"])


def fact_evidence(fact: dict[str, Any]) -> str:
    """The evidence text of a fact: the page's sentence that states it, else ``key: value``."""
    return fact.get("sentence") or f"{fact['key']}: {fact['value']}"


def _relating(key: str, value: str) -> bool:
    """Whether two entities sharing ``key = value`` are related (``country = Angola``), not
    merely alike (``HDI_change = increase``, ``GDP_year = 2017``)."""
    return (4 <= len(value) <= 80 and any(c.isalpha() for c in value) and value not in _UNRELATING_VALUE
            and not _UNRELATING_KEY.search(key))


def _seed_url(explorer: Explorer, seed: str) -> str:
    """A seed's URL: given as one; its Wikipedia URL on a simulator; else the URL of the
    search hit with that title (a page of the live web), falling back to the Wikipedia URL."""
    if seed.startswith(("http://", "https://")):
        return seed
    if not getattr(explorer, "structured_links", False):
        [hits] = explorer.search([seed])
        for hit in hits:
            if hit.title.casefold() == seed.casefold():
                return hit.url
    return title_to_url(seed)


def choose_seeds(explorer: Explorer, config: GraphConfig, rng: random.Random) -> list[PageRead]:
    """Obscure seeds: few inbound links, short pages, enough outgoing links; or ``config.seeds``."""
    if config.seeds:
        reads = []
        for title in config.seeds:
            read = explorer.read(_seed_url(explorer, title), f"facts, dates, numbers and related entities of {title}")
            if read is None:
                raise GraphError(f"seed entity {title!r} is not a page of this corpus")
            reads.append(read)
        return reads
    stats = explorer.page_stats()
    if not stats:
        raise GraphError("this explorer has no corpus statistics; give seed titles (GraphConfig.seeds)")
    pool = sorted(t for t, p in stats.items() if p.inbound_links <= config.seed_max_inbound
                  and config.seed_min_length <= p.length <= config.seed_max_length)
    rng.shuffle(pool)
    reads = []
    for title in pool[: 50 * config.num_seeds]:  # bounded: a corpus where few pages qualify fails fast
        read = explorer.read(stats[title].url, f"facts, dates, numbers and related entities of {title}")
        if read is not None and len({x.target for x in read.links}) >= config.seed_min_links:
            reads.append(read)
            if len(reads) >= config.num_seeds:
                break
    if not reads:
        raise GraphError(f"no page has <= {config.seed_max_inbound} inbound links, {config.seed_min_length}-"
                         f"{config.seed_max_length} characters and >= {config.seed_min_links} links (among "
                         f"{min(len(pool), 50 * config.num_seeds)} tried): the corpus is empty or tiny, or the seed "
                         "criteria are too strict")
    return reads


def build_graph(sim: Any, config: GraphConfig | None = None) -> nx.Graph:
    """Explore ``sim`` (a :class:`wiki_sim.WikiSim` or an :class:`~sailorfog.explore.Explorer`) into an entity graph.

    Raises :class:`GraphError` when no seed qualifies or a given seed does not exist."""
    config = config or GraphConfig()
    explorer = sim if isinstance(sim, Explorer) else SimExplorer(sim, k=config.search_k,
                                                                  max_text_chars=config.max_text_chars)
    rng = random.Random(config.seed)
    b = _Builder(explorer, config, stats=explorer.page_stats())
    dense = config.expansion == "dense"
    limit = config.max_nodes - (int(config.max_nodes * config.bridge_fraction) if dense else 0)
    frontier: deque[tuple[str, int]] = deque()
    for read in choose_seeds(explorer, config, rng):
        if read.title not in b.G and len(b.G) < limit:
            b.add_node(read, 0, "", read.url)
            frontier.append((read.title, 0))
    while frontier and len(b.G) < limit:
        title, depth = frontier.popleft()
        if depth < config.max_depth:
            b.expand(frontier, title, depth, limit, rng)
    if dense:
        b.densify(config.max_nodes)
    for node, degree in b.G.degree():
        b.G.nodes[node]["features"]["degree"] = degree
    b.G.graph.update(expansion=config.expansion, seed=config.seed, seeds=[n for n, d in b.G.nodes(data="depth")
                                                                        if d == 0])
    return b.G


# --- metrics ---------------------------------------------------------------------------
def graph_metrics(G: nx.Graph) -> dict[str, Any]:
    """Nodes, edges, components, density, cycle rank (E - N + components) and average clustering."""
    n, e = G.number_of_nodes(), G.number_of_edges()
    components = nx.number_connected_components(G) if n else 0
    kinds: dict[str, int] = {}
    for _, _, rels in G.edges(data="relations", default=[]):
        for r in rels:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    return {"nodes": n, "edges": e, "components": components, "density": round(nx.density(G), 6) if n > 1 else 0.0,
            "cycle_rank": e - n + components, "avg_clustering": round(nx.average_clustering(G), 6) if n else 0.0,
            "relations": dict(sorted(kinds.items()))}


def compare_expansions(sim: Any, config: GraphConfig | None = None) -> dict[str, dict[str, Any]]:
    """:func:`graph_metrics` of the dense build and of the pure outward build, same seeds and budget."""
    import dataclasses

    config = config or GraphConfig()
    return {mode: graph_metrics(build_graph(sim, dataclasses.replace(config, expansion=mode)))
            for mode in ("dense", "outward")}


# --- JSON ------------------------------------------------------------------------------
def node_link_data(G: nx.Graph) -> dict[str, Any]:
    """networkx node-link data with the edge list under ``edges`` (the key networkx 3.4+ writes)."""
    try:
        return nx.node_link_data(G, edges="edges")
    except TypeError:  # networkx < 3.4 names the argument ``link``
        return nx.node_link_data(G, link="edges")


def save_graph(G: nx.Graph, path: str | os.PathLike) -> None:
    """Write ``G`` as node-link JSON (atomically: ``PATH.tmp`` then rename)."""
    path = Path(path)
    data = node_link_data(G)
    with atomic_open(path, "w") as f:
        json.dump(data, f, ensure_ascii=False)


def load_graph(path: str | os.PathLike) -> nx.Graph:
    """Read a graph :func:`save_graph` wrote."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GraphError(f"no graph file at {path}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphError(f"{path} is not a graph JSON file ({exc})") from None
    if not isinstance(data, dict) or "nodes" not in data or "edges" not in data:
        raise GraphError(f"{path} is not a node-link graph (expected keys 'nodes' and 'edges')")
    try:
        G = nx.node_link_graph(data, edges="edges")
    except TypeError:  # networkx < 3.4 names the argument ``link``
        G = nx.node_link_graph(data, link="edges")
    if G.is_directed() or G.is_multigraph():
        raise GraphError(f"{path} holds a directed or multi graph; expected an undirected simple graph")
    return G
