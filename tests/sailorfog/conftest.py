"""Fixtures for the synthesis tests: a small fictional simulator, its C2-style graph and index."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

from tests.sailorfog.corpus_fixture import PAGES
from tests.sailorfog.helpers import toy_graph, toy_index
from tests.wiki_sim.simhelpers import build_jsonl


@dataclass(frozen=True)
class Sub:
    """A sampled subgraph as contract C2's ``Subgraph`` (nodes, edges, wl_hash)."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    wl_hash: str


def subgraph(G: nx.Graph, nodes) -> Sub:
    sg = G.subgraph(nodes)
    edges = tuple(sorted(tuple(sorted(e)) for e in sg.edges))
    return Sub(tuple(nodes), edges, nx.weisfeiler_lehman_graph_hash(nx.Graph(list(edges)), iterations=3))


@pytest.fixture(scope="session")
def toy_wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_jsonl(tmp_path_factory.mktemp("toy"), PAGES, name="toywiki")


@pytest.fixture(scope="session")
def toy_sim(toy_wiki: Path):
    from wiki_sim import WikiSim

    sim = WikiSim(toy_wiki)
    yield sim
    sim.close()


@pytest.fixture(scope="session")
def toy_G(toy_sim) -> nx.Graph:
    return toy_graph(toy_sim)


@pytest.fixture(scope="session")
def toy_index_(toy_sim, toy_G):
    return toy_index(toy_sim, toy_G)


@pytest.fixture()
def toy_env(toy_wiki: Path):
    import gymnasium as gym

    import envs  # noqa: F401

    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(toy_wiki), tasks=[{"question": "placeholder", "answer": "placeholder"}],
                   tools=["search", "visit"], current_date="2025-09-01")
    yield env
    env.close()
