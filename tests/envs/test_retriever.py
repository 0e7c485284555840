"""The ``retriever`` argument of websailor/WikiSim-v0 and of the MCP server's tools."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registration)
from envs.protocol import format_turn
from envs.servers.mcp_server import simulator_tools
from tests.wiki_sim.dense_helpers import PAGES, tiny_model
from tests.wiki_sim.simhelpers import build_jsonl
from wiki_sim import WikiSimError
from wiki_sim.common.errors import UserError
from wiki_sim.embed import build_vectors

TASKS = [{"question": "Which mountain is the highest above sea level?", "answer": "Mount Everest"}]


@pytest.fixture(scope="module")
def wikis(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("retriever")
    plain = build_jsonl(root, PAGES, name="plain")
    dense = build_jsonl(root, PAGES, name="dense")
    build_vectors(dense, tiny_model(root / "model"), recipe="input", dim=16)
    return plain, dense


def test_gym_make_searches_with_the_retriever(wikis):
    env = gym.make("websailor/WikiSim-v0", wiki_dir=wikis[1], tasks=TASKS, tools=["search"], retriever="hybrid")
    try:
        assert env.unwrapped.simulator.retriever == "hybrid"
        env.reset(seed=0)
        obs, *_ = env.step(format_turn("s", tool_call=("search", {"query": ["highest mountain Himalayas"]})))
        assert "https://en.wikipedia.org/wiki/Mount_Everest" in obs
    finally:
        env.close()
    default = gym.make("websailor/WikiSim-v0", wiki_dir=wikis[1], tasks=TASKS, tools=["search"])
    assert default.unwrapped.simulator.retriever == "bm25"
    default.close()


def test_a_retriever_the_simulator_lacks_fails_gym_make_and_the_server(wikis):
    with pytest.raises(WikiSimError, match="--retriever dense"):
        gym.make("websailor/WikiSim-v0", wiki_dir=wikis[0], tasks=TASKS, retriever="dense")
    with pytest.raises(WikiSimError, match="--retriever hybrid"):
        simulator_tools(str(wikis[0]), retriever="hybrid")
    tools, release = simulator_tools(str(wikis[1]), retriever="dense")
    try:
        assert set(tools) == {"search", "visit"}
    finally:
        release()


def test_serve_mcp_takes_the_retriever_flag(wikis):
    from envs.servers.cli import MCPConfig

    assert MCPConfig(wiki_dir=str(wikis[1]), retriever="hybrid").retriever == "hybrid"
    with pytest.raises(UserError, match="--retriever must be bm25, dense or hybrid"):
        MCPConfig(wiki_dir=str(wikis[1]), retriever="splade")
