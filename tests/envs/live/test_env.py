"""``websailor/LiveWeb-v0`` through gym.make against the fake providers: check_env, an
episode with search, visit and an answer, per-call metrics in ``info``, run statistics."""

from __future__ import annotations

import json
from dataclasses import asdict

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the environments)
from envs.tools.search import LiveSearchTool
from envs.tools.visit import LiveVisitTool
from envs.protocol import format_turn
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool
from tests.envs.live.support import KEYS, config_for


def _tasks(fakeweb):
    return [{"id": f"t{i}", "question": f"Who founded the {d.title}?", "answer": d.founder}
            for i, d in enumerate(fakeweb.docs[:3])]


def _make(fakeweb, tmp_path, **kwargs):
    cfg = asdict(config_for(fakeweb, tmp_path))
    return gym.make("websailor/LiveWeb-v0", tasks=_tasks(fakeweb), config=cfg, current_date="2025-07-18", **kwargs)


def test_check_env(fakeweb, tmp_path):
    env = _make(fakeweb, tmp_path)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_episode_with_search_visit_and_answer(fakeweb, tmp_path):
    env = _make(fakeweb, tmp_path)
    try:
        obs, info = env.reset(options={"task_index": 1})
        doc = fakeweb.docs[1]
        system = env.unwrapped.messages()[0]["content"]
        names = [json.loads(line)["function"]["name"]
                 for line in system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()]
        assert names == ["search", "visit", "google_scholar", "python"]
        obs, reward, terminated, truncated, info = env.step(
            format_turn("look it up", tool_call=("search", {"query": [doc.title]})))
        assert obs.startswith(f"<tool_response>\nA search for '{doc.title}' found") and not terminated
        meta = info["tool_metadata"]
        assert info["tool_ok"] and meta["source"] == "serper" and meta["cache_hit"] is False
        assert {"retries", "latency_s", "degraded", "fallback"} <= set(meta)
        fakeweb.faults.fail_next("jina", "503")
        obs, reward, terminated, truncated, info = env.step(
            format_turn("read it", tool_call=("visit", {"url": fakeweb.page_url(doc.slug), "goal": "who founded it"})))
        assert doc.fact in obs and info["tool_metadata"]["retries"] == 1
        assert not any(key in json.dumps(info) or key in obs for key in KEYS.values())
        obs, reward, terminated, truncated, info = env.step(format_turn("done", answer=doc.founder))
        assert terminated and info["is_correct"]
        stats = env.unwrapped.live_web.snapshot()
        assert stats["calls"]["search"]["calls"] == 1 and stats["calls"]["visit"]["ok"] == 1
        assert stats["sources"]["jina"]["error:retryable"] == 1
    finally:
        env.close()


def test_keyless_env_and_tools_by_name(fakeweb, tmp_path):
    cfg = asdict(config_for(fakeweb, tmp_path, serper_api_key=None, serpapi_api_key=None, jina_api_key=None,
                            summarizer_model=None))
    env = gym.make("websailor/LiveWeb-v0", tasks=_tasks(fakeweb), config=cfg, tools=["search", "visit"])
    try:
        env.reset(seed=0)
        obs, *_, info = env.step(format_turn("t", tool_call=("search", {"query": fakeweb.docs[0].title})))
        assert info["tool_metadata"]["source"] == "wikipedia" and "https://en.wikipedia.org/wiki/" in obs
    finally:
        env.close()
    with pytest.raises(ValueError, match="unknown tool name 'browse'"):
        gym.make("websailor/LiveWeb-v0", tasks=_tasks(fakeweb), config=cfg, tools=["browse"])


def test_base_urls_argument_points_the_env_elsewhere(fakeweb, tmp_path):
    cfg = asdict(config_for(fakeweb, tmp_path))
    cfg["base_urls"] = {}
    env = gym.make("websailor/LiveWeb-v0", tasks=_tasks(fakeweb), config=cfg, base_urls=fakeweb.base_urls(),
                   tools=["search"])
    try:
        assert env.unwrapped.live_web.config.base_urls["serper"] == fakeweb.base_urls()["serper"]
    finally:
        env.close()


def test_same_tool_schemas_as_the_simulator():
    assert LiveVisitTool.description == VisitTool.description and LiveVisitTool.parameters == VisitTool.parameters
    search = LiveSearchTool.__new__(LiveSearchTool)
    LiveSearchTool.__init__(search, web=None)
    assert search.description == SearchTool.description and search.parameters == SearchTool.parameters
