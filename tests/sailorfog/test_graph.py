"""Entity graph construction on both real corpora, through the simulator and through the tool objects."""

from __future__ import annotations

import dataclasses
import json

import networkx as nx
import pytest

from envs.formatting import format_search_batch
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool
from sailorfog.explore import Found, SimExplorer, ToolExplorer, parse_search_output
from sailorfog.graph import (GraphConfig, GraphError, build_graph, compare_expansions, graph_metrics, load_graph,
                             node_link_data, save_graph)
from wiki_sim import WikiSim

NODE_KEYS = {"url", "lead", "depth", "provenance", "features", "facts", "dates", "numbers"}
FEATURES = {"degree", "inbound_links", "page_length", "num_facts", "num_dates", "num_numbers", "depth"}
SMALL = GraphConfig(max_nodes=60, num_seeds=4, seed=3)


@pytest.fixture(scope="module")
def sim(default_wiki):
    with WikiSim(default_wiki) as s:
        yield s


@pytest.fixture(scope="module")
def dense(sim):
    return build_graph(sim, SMALL)


@pytest.fixture(scope="module")
def outward(sim):
    return build_graph(sim, dataclasses.replace(SMALL, expansion="outward"))


def check_contract(G: nx.Graph, sim: WikiSim, search_k: int = 10) -> None:
    stats = {p.title: p for p in sim.iter_pages()}
    assert isinstance(G, nx.Graph) and not G.is_directed() and not G.is_multigraph()
    for node, data in G.nodes(data=True):
        assert set(data) >= NODE_KEYS and set(data["features"]) == FEATURES
        page = sim.page(node)
        assert page is not None and page["title"] == node and data["url"] == page["url"]
        assert data["lead"] == page["text"][:600]
        f = data["features"]
        assert f["degree"] == G.degree(node) and f["depth"] == data["depth"]
        assert f["inbound_links"] == stats[node].inbound_links and f["page_length"] == stats[node].length
        assert (f["num_facts"], f["num_dates"], f["num_numbers"]) == (
            len(data["facts"]), len(data["dates"]), len(data["numbers"]))
        assert all(set(x) == {"key", "value", "target", "sentence"} for x in data["facts"])
        assert all(set(x) == {"text", "year", "month", "day", "sentence"} for x in data["dates"])
        assert all(set(x) == {"text", "value", "unit", "sentence"} for x in data["numbers"])
        prov = data["provenance"]
        if data["depth"] == 0:
            assert prov["query"] == ""
        if prov["query"]:  # the recorded query really finds the page with the search tool's backend
            [hits] = sim.search([prov["query"]], k=search_k)
            assert node in [h.title for h in hits]
    for u, v, data in G.edges(data=True):
        assert data["relations"]
        for r in data["relations"]:
            assert {r["source"], r["target"]} == {u, v}
            assert r["kind"] in ("link", "fact", "shared_fact")
            if r["kind"] == "link":  # the source page really links to the target, and says so
                links = sim.page_links(r["source"])
                assert any(x.target == r["target"] and x.sentence == r["sentence"] for x in links)
                assert r["url"] == sim.page(r["source"])["url"]


def test_dense_graph_keeps_the_contract(dense, sim):
    assert dense.number_of_nodes() == 60
    check_contract(dense, sim)


def test_seeds_are_obscure(dense, sim):
    stats = {p.title: p for p in sim.iter_pages()}
    seeds = dense.graph["seeds"]
    assert len(seeds) == 4
    for s in seeds:
        assert stats[s].inbound_links <= SMALL.seed_max_inbound
        assert SMALL.seed_min_length <= stats[s].length <= SMALL.seed_max_length
    # following a random link reaches a page with sum(in^2)/sum(in) inbound links on average;
    # the builder, preferring obscure neighbours, stays well below that
    inbound = [p.inbound_links for p in stats.values()]
    random_link_target = sum(i * i for i in inbound) / sum(inbound)
    mean_graph = sum(d["features"]["inbound_links"] for _, d in dense.nodes(data=True)) / len(dense)
    assert mean_graph < 0.75 * random_link_target
    assert all(d["features"]["inbound_links"] <= SMALL.neighbor_max_inbound for _, d in dense.nodes(data=True))


def test_densification_makes_cycles_outward_expansion_does_not(dense, outward, sim):
    check_contract(outward, sim)
    md, mo = graph_metrics(dense), graph_metrics(outward)
    assert mo["cycle_rank"] == 0 and mo["avg_clustering"] == 0.0  # a forest: one discovery edge per node
    assert mo["edges"] == mo["nodes"] - mo["components"]
    assert md["cycle_rank"] >= 10 and md["density"] > mo["density"] and md["avg_clustering"] > 0.05
    assert md["components"] <= mo["components"]
    assert md["cycle_rank"] == md["edges"] - md["nodes"] + md["components"]
    assert compare_expansions(sim, SMALL) == {"dense": md, "outward": mo}


def test_same_seed_same_graph_and_json_round_trip(dense, sim, tmp_path):
    again = build_graph(sim, SMALL)
    assert node_link_data(again) == node_link_data(dense)
    other = build_graph(sim, dataclasses.replace(SMALL, seed=4))
    assert set(other) != set(dense)
    path = tmp_path / "graph.json"
    save_graph(dense, path)
    assert not (tmp_path / "graph.json.tmp").exists()
    loaded = load_graph(path)
    assert node_link_data(loaded) == node_link_data(dense)
    assert loaded.graph["seeds"] == dense.graph["seeds"]


def test_bad_inputs(sim, tmp_path):
    with pytest.raises(GraphError, match="not a page"):
        build_graph(sim, GraphConfig(seeds=("No such entity 123",)))
    with pytest.raises(GraphError, match="seed criteria"):
        build_graph(sim, GraphConfig(seed_min_links=10_000))
    with pytest.raises(ValueError, match="max_nodes must be an integer >= 1, got 0"):
        GraphConfig(max_nodes=0)
    with pytest.raises(ValueError, match="expansion must be 'dense' or 'outward'"):
        GraphConfig(expansion="tree")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed_min_length"):
        GraphConfig(seed_min_length=500, seed_max_length=100)
    with pytest.raises(ValueError, match="seeds"):
        GraphConfig(seeds="Ulm")  # type: ignore[arg-type]
    with pytest.raises(GraphError, match="no graph file"):
        load_graph(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(GraphError, match="not a graph JSON"):
        load_graph(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text(json.dumps([1, 2]))
    with pytest.raises(GraphError, match="node-link"):
        load_graph(tmp_path / "list.json")


def test_explicit_seeds_and_fact_edges_on_the_gensim_dump(gensim_wiki):
    with WikiSim(gensim_wiki) as gsim:
        config = GraphConfig(max_nodes=40, seeds=("Economy of Angola", "Aristotle"), seed=0)
        G = build_graph(gsim, config)
        check_contract(G, gsim)
        assert set(G.graph["seeds"]) == {"Economy of Angola", "Aristotle"}
        rels = [r for _, _, rs in G.edges(data="relations") for r in rs]
        fact = [r for r in rels if r["kind"] == "fact"]
        # infobox values that are pages become edges: Economy of Angola -sectors-> Agriculture
        assert any(r["source"] == "Economy of Angola" and r["target"] == "Agriculture" and r["key"] == "sectors"
                   for r in fact)
        assert all(r["sentence"].startswith(f"{r['key']}: ") for r in fact)  # infobox facts: "key: value"
        targets = {f["target"] for f in G.nodes["Economy of Angola"]["facts"] if f["target"]}
        assert "Agriculture" in targets
        shared = [r for r in rels if r["kind"] == "shared_fact"]
        for r in shared:
            a = {(f["key"], f["value"].casefold()) for f in G.nodes[r["source"]]["facts"]}
            b = {(f["key"], f["value"].casefold()) for f in G.nodes[r["target"]]["facts"]}
            ta = {f["target"] for f in G.nodes[r["source"]]["facts"] if f["target"]}
            tb = {f["target"] for f in G.nodes[r["target"]]["facts"] if f["target"]}
            assert (a & b) or (ta & tb)


def test_parse_search_output_round_trips_the_tool_format():
    hits = [[Found("Ulm", "https://en.wikipedia.org/wiki/Ulm", "A city on the Danube.\nIn Germany."),
             Found("Ulm Minster", "https://en.wikipedia.org/wiki/Ulm_Minster", "")], []]
    text = format_search_batch(["ulm", "nothing"], hits)
    parsed = parse_search_output(text)
    assert [[(h.title, h.url) for h in q] for q in parsed] == [[(h.title, h.url) for h in q] for q in hits]
    assert parsed[0][0].snippet == "A city on the Danube. In Germany."


def test_the_same_builder_runs_through_the_tool_objects(sim):
    """The live-layer path: only the search and visit tools' text, here over the simulator."""
    explorer = ToolExplorer(SearchTool(sim), VisitTool(sim), max_names=6, stats=SimExplorer(sim).page_stats())
    config = GraphConfig(max_nodes=14, seeds=("Nubia", "Hmong people"), branching=3, search_neighbors=0)
    G = build_graph(explorer, config)
    assert 8 <= G.number_of_nodes() <= 14 and set(G.graph["seeds"]) == {"Nubia", "Hmong people"}
    for node, data in G.nodes(data=True):
        assert sim.page(node) is not None
        if data["depth"] > 0:  # found by searching a name the visited page gave
            assert data["provenance"]["query"]
            [hits] = sim.search([data["provenance"]["query"]])
            assert node in [h.title for h in hits]
    for u, v, rels in G.edges(data="relations"):
        for r in rels:
            source_text = sim.visit(sim.page(r["source"])["url"],
                                    f"facts, dates, numbers and related entities of {r['source']}")
            assert r["sentence"] and r["sentence"] in source_text.replace("\n", " ") or r["sentence"] in source_text
    assert graph_metrics(G)["cycle_rank"] >= 1  # densified through the tools too


class _FakeWebTools:
    """Search and visit tools over a tiny non-Wikipedia web, speaking the shared tool formats."""

    PAGES = {
        "https://example.org/varnel": ("Varnel Observatory", "Varnel Observatory was founded in 1820 by Kato Mira. "
                                       "It stands beside Lowrick Bridge. Its lenses came from Essen Glassworks."),
        "https://example.org/lowrick": ("Lowrick Bridge", "Lowrick Bridge is 120 metres long. It was opened in 1851 "
                                        "next to Varnel Observatory."),
        "https://example.org/kato": ("Kato Mira", "Kato Mira (1790–1861) was an astronomer. Kato Mira ordered lenses "
                                     "from Essen Glassworks."),
        "https://example.org/essen": ("Essen Glassworks", "Essen Glassworks made lenses from 1801. Among its "
                                      "customers was Kato Mira."),
    }

    def __init__(self):
        self.queries: list[str] = []

    def search(self, arguments):
        from envs.tools.base import ToolResult

        results = []
        for q in arguments["query"]:
            self.queries.append(q)
            words = set(q.lower().split())
            results.append([{"title": t, "url": u, "snippet": body[:60]} for u, (t, body) in self.PAGES.items()
                            if words <= set(t.lower().split())])
        return ToolResult(format_search_batch(arguments["query"], results))

    def visit(self, arguments):
        from envs.tools.base import ToolResult
        from wiki_sim.focus import Focused, format_not_found, format_visit

        [url] = arguments["url"]
        if url not in self.PAGES:
            return ToolResult(format_not_found(url))
        return ToolResult(format_visit(url, arguments["goal"], Focused(self.PAGES[url][1], self.PAGES[url][0])))


def test_tool_explorer_on_pages_that_are_not_wikipedia():
    web = _FakeWebTools()
    explorer = ToolExplorer(web.search, web.visit, max_names=8)
    G = build_graph(explorer, GraphConfig(max_nodes=10, seeds=("Varnel Observatory",), search_neighbors=0))
    assert set(G) == {"Varnel Observatory", "Lowrick Bridge", "Kato Mira", "Essen Glassworks"}
    assert G.nodes["Kato Mira"]["url"] == "https://example.org/kato"
    assert G.nodes["Kato Mira"]["provenance"] == {"query": "Kato Mira", "url": "https://example.org/varnel"}
    assert "Kato Mira" in web.queries
    assert [d["year"] for d in G.nodes["Kato Mira"]["dates"]] == [1790, 1861]
    assert G.nodes["Lowrick Bridge"]["numbers"][0]["text"] == "120 metres"
    # Varnel - Kato - Essen - Varnel: a cycle from names in the visited texts
    assert nx.cycle_basis(G) and G.has_edge("Kato Mira", "Essen Glassworks")
    assert G.nodes["Varnel Observatory"]["features"]["inbound_links"] == -1  # unknown on the web
    with pytest.raises(GraphError, match="corpus statistics"):
        build_graph(explorer, GraphConfig(max_nodes=10))


def test_a_tiny_corpus_is_a_clear_error(tmp_path):
    from tests.wiki_sim.simhelpers import build_jsonl

    wiki = build_jsonl(tmp_path, [("Alpha", "Alpha is a town founded in 1850."), ("Beta", "Beta is a river."),
                                  ("Gamma", "Gamma is a hill.")])
    with WikiSim(wiki) as tiny:
        with pytest.raises(GraphError, match="corpus is empty or tiny"):
            build_graph(tiny, GraphConfig())
        G = build_graph(tiny, GraphConfig(seeds=("Alpha",)))  # a seed with nothing to expand to
        assert list(G) == ["Alpha"] and G.nodes["Alpha"]["dates"][0]["year"] == 1850


def test_tool_explorer_keeps_a_web_page_title_whole():
    """A search hit's title is a page title, not a link target: 'C# (language)' keeps its '#'."""
    web = _FakeWebTools()
    web.PAGES = {**web.PAGES, "https://example.org/csharp": ("C# (language)", "C# (language) is a language.")}
    explorer = ToolExplorer(web.search, web.visit, max_names=8)
    [hits] = explorer.search(["C# (language)"])
    assert [h.url for h in hits] == ["https://example.org/csharp"]
    assert explorer.title_of("https://example.org/csharp") == "C# (language)"
