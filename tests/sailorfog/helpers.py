"""Test scaffolding: a contract-C2 entity graph and a corpus index built by hand from a small simulator.

The graph follows contract C2 (node and edge attributes as ``sailorfog.graph`` builds them);
relations are the sentences of one page that name another page's title.
"""

from __future__ import annotations

import networkx as nx

from sailorfog.corpus import CorpusIndex
from sailorfog.text import NUMBER, YEAR, display_title, mask, numbers, sentences


def _mentions(sentence: str, title: str) -> bool:
    return mask(sentence, [title, display_title(title)], "\x00") != sentence


def all_titles(sim) -> list[str]:
    return sorted(sim.random_pages(sim.stats()["pages"], seed=0))


def toy_graph(sim, query_prefix: str = "") -> nx.Graph:
    """Every page a node; an edge wherever a sentence of one page names another."""
    G = nx.Graph()
    titles = all_titles(sim)
    for depth, title in enumerate(titles):
        page = sim.page(title)
        text = page["text"]
        dates = [{"text": m.group(1), "year": int(m.group(1)), "month": None, "day": None, "sentence": s}
                 for s in sentences(text) for m in YEAR.finditer(s)]
        nums = [{"text": m.group(0), "value": v, "unit": "", "sentence": s}
                for s in sentences(text) for m in NUMBER.finditer(s) for v in numbers(m.group(0))
                if not 1000 <= v <= 2099]
        facts = [{"key": f["key"], "value": f["value"], "target": None, "sentence": ""} for f in sim.facts(title)]
        G.add_node(title, url=page["url"], lead=page["lead"], depth=min(depth, 3),
                   provenance={"query": f"{query_prefix}{display_title(title)}" if depth else "", "url": ""},
                   features={}, facts=facts, dates=dates, numbers=nums)
    for title in titles:
        for s in sentences(sim.page(title)["text"]):
            for other in titles:
                if other != title and _mentions(s, other):
                    rel = {"source": title, "target": other, "kind": "link", "sentence": s, "key": "",
                           "query": "", "url": G.nodes[title]["url"]}
                    if G.has_edge(title, other):
                        G.edges[title, other]["relations"].append(rel)
                    else:
                        G.add_edge(title, other, relations=[rel])
    return G


def toy_index(sim, G: nx.Graph) -> CorpusIndex:
    index = CorpusIndex()
    for title in all_titles(sim):
        index.add_page(title, sim.page(title)["text"], sim.facts(title))
    for u, v in G.edges:
        index.add_link(u, v)
    return index.finish()
