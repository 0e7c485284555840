"""The compact setting of websailor/WikiSim-v0 (envs/compact.py) on the real default simulator."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the environments)
from envs.compact import COMPACT_SYSTEM_PROMPT, CompactConfig
from envs.protocol import format_turn

TASKS = [{"question": "Which article has the short description \"Capital city of France\"?", "answer": "Paris"}]


def _search(env, query: str) -> str:
    env.reset(seed=0)
    obs, *_ = env.step(format_turn("look", tool_call=("search", {"query": [query, "Berlin"]})))
    return obs


def test_compact_gives_short_prompt_top_k_short_snippets_and_its_budgets(default_wiki):
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=TASKS, compact=True)
    try:
        obs, _ = env.reset(seed=0)
        assert COMPACT_SYSTEM_PROMPT in obs and "<tools>" in obs and "Current date" not in obs
        assert env.unwrapped.max_tool_calls == 2
        hits = _search(env, "Paris France capital")
        assert "found 3 results" in hits and "Berlin" not in hits  # one query read, three hits
        snippets = [line for line in hits.splitlines() if line and not re.match(r"^(\d+\. \[|A search|## |<)", line)]
        assert snippets and all(len(s) <= 80 for s in snippets)
        obs, *_ = env.step(format_turn("read", tool_call=("visit", {"url": ["https://en.wikipedia.org/wiki/Paris"],
                                                                    "goal": "what it is"})))
        body = obs.split("<tool_response>\n", 1)[1].rsplit("\n</tool_response>", 1)[0]
        evidence = body.split("Evidence in page: \n", 1)[1]
        assert len(evidence) == 200 and evidence.startswith("Paris") and "Summary" not in body
    finally:
        env.close()


def test_a_visit_shows_the_page_whatever_its_url_and_goal_cost(default_wiki):
    """The header (URL, goal) does not eat the page's characters; a long goal is cut; a page not found is
    said, bounded."""
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=TASKS, compact=True)
    try:
        env.reset(seed=0)
        long_goal = "the city " * 400
        obs, *_ = env.step(format_turn("read", tool_call=("visit", {"url": ["https://en.wikipedia.org/wiki/Paris"],
                                                                    "goal": long_goal})))
        evidence = obs.split("Evidence in page: \n", 1)[1].split("\n</tool_response>", 1)[0]
        assert len(evidence) == 200 and "Paris" in evidence
        assert long_goal[:100].strip() in obs and long_goal[:101] not in obs
        obs, *_ = env.step(format_turn("read", tool_call=("visit", {"url": ["https://en.wikipedia.org/wiki/No_such_pagee"],
                                                                    "goal": "x"})))
        body = obs.split("<tool_response>\n", 1)[1].split("\n</tool_response>", 1)[0]
        assert "page not found" in body and len(body) <= 400
    finally:
        env.close()


def test_a_mapping_sets_fields_and_explicit_arguments_win(default_wiki):
    env = gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=TASKS,
                   compact={"search_k": 1, "max_tool_calls": 5}, max_tool_calls=7)
    try:
        assert re.search(r"found 1 results?:", _search(env, "Paris France capital"))
        assert env.unwrapped.max_tool_calls == 7
    finally:
        env.close()


@pytest.mark.parametrize("value,message", [
    ({"search_kk": 2}, "unknown fields \\['search_kk'\\]"),
    ({"search_k": 0}, "search_k: expected an integer >= 1, got 0"),
    ("yes", "expected True, a CompactConfig or a mapping"),
])
def test_bad_settings_say_what_was_expected(default_wiki, value, message):
    with pytest.raises(ValueError, match=message):
        gym.make("websailor/WikiSim-v0", wiki_dir=str(default_wiki), tasks=TASKS, compact=value)


def test_config_round_trips_through_json():
    import json

    config = CompactConfig(search_k=2)
    assert CompactConfig.coerce(json.loads(json.dumps(config.to_dict()))) == config
