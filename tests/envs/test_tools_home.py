"""One home for tools: one schema per tool in both environments, one factory, and structured
results in ``info["tool_data"]`` (hits per query, visited pages) so nobody parses text."""

from __future__ import annotations

import pytest

from envs.env import ResearchEnv
from envs.protocol import format_turn
from envs.tools import build_tools, make_tool, tool_schema
from envs.tools.search import SEARCH_PARAMETERS
from envs.tools.visit import VISIT_PARAMETERS
from tests.envs.conftest import TASKS
from envs.live.fakeweb import FakeWeb
from tests.envs.live.support import KEYS, config_for


@pytest.fixture
def fakeweb():
    """The fake live providers on loopback."""
    with FakeWeb(keys=KEYS) as web:
        yield web


def test_both_environments_describe_each_tool_identically(mini_wiki, fakeweb, tmp_path):
    from envs.live.manager import LiveWeb

    web = LiveWeb(config_for(fakeweb, tmp_path))
    try:
        for name in ("search", "visit", "python"):
            sim_tool, live_tool = make_tool(name, sim=mini_wiki), make_tool(name, web=web)
            assert type(sim_tool) is not type(live_tool) or name == "python"
            assert tool_schema(sim_tool) == tool_schema(live_tool)
        assert make_tool("search", sim=mini_wiki).parameters is SEARCH_PARAMETERS
        assert make_tool("visit", web=web).parameters is VISIT_PARAMETERS
        assert tool_schema(make_tool("google_scholar", web=web))["parameters"] is SEARCH_PARAMETERS
    finally:
        web.close()


def test_one_factory_with_clear_errors(mini_wiki):
    tools, owned = build_tools(None, sim=mini_wiki)
    assert [t.name for t in tools] == ["search", "visit", "python"] and owned == tools
    with pytest.raises(ValueError, match="google_scholar tool needs the live web"):
        make_tool("google_scholar", sim=mini_wiki)
    with pytest.raises(ValueError, match="unknown tool name 'browse'"):
        build_tools(["browse"], sim=mini_wiki)


def _steps(env, calls):
    env.reset(options={"task_index": 0})
    return [env.step(format_turn("next", tool_call=call))[4] for call in calls]


def test_simulator_tool_data_in_info(mini_wiki):
    env = ResearchEnv(build_tools(["search", "visit"], sim=mini_wiki)[0], TASKS, current_date="2025-07-18")
    url = "https://en.wikipedia.org/wiki/Epsom_Derby"
    search, visit, bad = _steps(env, [("search", {"query": ["Epsom Derby 1964", "Solar Dynamics"]}),
                                      ("visit", {"url": [url], "goal": "where is it run"}),
                                      ("search", {"query": []})])
    queries = search["tool_data"]["queries"]
    assert [q["query"] for q in queries] == ["Epsom Derby 1964", "Solar Dynamics"]
    assert queries[0]["ok"] and {"title": "Epsom Derby", "url": url} in queries[0]["hits"]
    expected = mini_wiki.search(["Epsom Derby 1964", "Solar Dynamics"], k=10)
    assert [[h["title"] for h in q["hits"]] for q in queries] == [[h.title for h in r] for r in expected]
    assert "Solar Dynamics Observatory" in [h["title"] for h in queries[1]["hits"]]
    assert visit["tool_data"] == {"pages": [{"url": url, "ok": True}]}
    assert bad["tool_data"] == {} and not bad["tool_ok"] and bad["tool_error"]


def test_live_tool_data_in_info(fakeweb, tmp_path):
    from envs.liveweb import make_liveweb_env

    doc = fakeweb.docs[2]
    env = make_liveweb_env(TASKS, tools=["search", "visit", "google_scholar"], config=config_for(fakeweb, tmp_path),
                           current_date="2025-07-18")
    try:
        search, visit, scholar = _steps(env, [
            ("search", {"query": [doc.title]}),
            ("visit", {"url": [fakeweb.page_url(doc.slug), f"{fakeweb.url}/pages/missing"], "goal": "who founded it"}),
            ("google_scholar", {"query": [doc.title]})])
        hits = search["tool_data"]["queries"][0]["hits"]
        assert hits[0] == {"title": doc.title, "url": fakeweb.page_url(doc.slug)}
        assert visit["tool_data"] == {"pages": [{"url": fakeweb.page_url(doc.slug), "ok": True},
                                                {"url": f"{fakeweb.url}/pages/missing", "ok": False}]}
        assert scholar["tool_data"]["queries"][0]["hits"][0]["url"].endswith(".pdf")
    finally:
        env.close()
