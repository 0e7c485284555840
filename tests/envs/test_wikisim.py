"""websailor/WikiSim-v0 on real simulators built by the session fixtures (tests/conftest.py)."""

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registration)
from envs.baselines import HeuristicAgent, RandomAgent
from envs.derived_tasks import derive_tasks, masked_first_sentence
from envs.env import ResearchEnv
from envs.episode import run_episode
from envs.protocol import format_turn
from envs.tasks import write_jsonl_tasks
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool
from envs.wikisim import build_tools, make_wikisim_env
from wiki_sim import WikiSim

from .conftest import EchoTool


@pytest.fixture(scope="module")
def derived_tasks(default_wiki, tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "derived.jsonl"
    write_jsonl_tasks(path, derive_tasks(default_wiki, 40, seed=0))
    return path


def test_check_env_passes_with_no_warnings(default_wiki, derived_tasks):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("websailor/WikiSim-v0", wiki_dir=default_wiki, tasks=derived_tasks, render_mode="ansi")
        try:
            check_env(env.unwrapped)
            obs, info = env.reset(seed=5)
            obs, *_ = env.step(format_turn("s", tool_call=("search", {"query": ["France"]})))
            assert obs in env.observation_space
        finally:
            env.close()


def test_default_tools_and_tool_selection(default_wiki, derived_tasks):
    env = make_wikisim_env(default_wiki, derived_tasks)
    assert [t.name for t in env.unwrapped.tools] == ["search", "visit", "python"]
    env.close()
    env = make_wikisim_env(default_wiki, derived_tasks, tools=["visit", EchoTool()])
    assert [t.name for t in env.tools] == ["visit", "echo"]
    env.close()
    with pytest.raises(ValueError, match="unknown tool name 'browse'"):
        make_wikisim_env(default_wiki, derived_tasks, tools=["browse"])
    with pytest.raises(ValueError, match="tools must be None or a list"):
        build_tools(None, "search")


def test_search_and_visit_tools_on_the_simulator(default_wiki):
    sim = WikiSim(default_wiki)
    search, visit = SearchTool(sim), VisitTool(sim)
    result = search({"query": ["Stanley Kubrick film", "Georges Seurat painting"]})
    assert result.ok and result.text.startswith("A search for 'Stanley Kubrick film' found")
    assert "\n=======\nA search for 'Georges Seurat painting' found" in result.text
    assert "(https://en.wikipedia.org/wiki/" in result.text and result.metadata["queries"] == 2
    single = search({"queries": "Georges Seurat"})  # a single string and the alias are accepted
    assert single.ok and "A search for 'Georges Seurat'" in single.text
    url = "https://en.wikipedia.org/wiki/2001:_A_Space_Odyssey"
    page = visit({"url": url, "goal": "who directed it"})
    assert page.ok and page.text.startswith(f"The useful information in {url} for user goal who directed it")
    assert "Kubrick" in page.text
    both = visit({"url": [url, "https://en.wikipedia.org/wiki/No_such_page_xyz"], "goal": "director"})
    assert "\n=======\n" in both.text and "page not found" in both.text
    bad = visit({"url": [url] * 6, "goal": "x"})
    assert not bad.ok and "at most 5" in bad.text


def test_heuristic_beats_random_on_derived_tasks(default_wiki, derived_tasks):
    env = gym.make("websailor/WikiSim-v0", wiki_dir=default_wiki, tasks=derived_tasks, tools=["search", "visit"])
    n = len(env.unwrapped.tasks)
    heuristic = [run_episode(env, HeuristicAgent(), options={"task_index": i}).info["is_correct"] for i in range(n)]
    policy = RandomAgent(seed=0)
    random_runs = [run_episode(env, policy, options={"task_index": i}).info["is_correct"] for i in range(n)]
    env.close()
    assert np.mean(heuristic) >= 0.5 and np.mean(heuristic) > np.mean(random_runs) + 0.3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec(default_wiki, derived_tasks, mode):
    envs_ = gym.make_vec("websailor/WikiSim-v0", num_envs=2, vectorization_mode=mode,
                         wiki_dir=str(default_wiki), tasks=str(derived_tasks), tools=["search", "visit"])
    try:
        obs, _ = envs_.reset(seed=[0, 1])
        agents = [HeuristicAgent(), HeuristicAgent()]
        for agent, o in zip(agents, obs):
            agent.reset(o, {})
        for _ in range(3):  # search, visit, answer
            obs, rewards, terminated, truncated, info = envs_.step(tuple(a.act(o, {}) for a, o in zip(agents, obs)))
        assert terminated.all() and list(info["termination"]) == ["answer", "answer"]
        assert all(t[2]["role"] == "assistant" for t in envs_.call("messages"))
    finally:
        envs_.close()


def test_derived_tasks_are_answerable_lookups(default_wiki):
    tasks = derive_tasks(default_wiki, 10, seed=1)
    assert len(tasks) == 10 and {t.metadata["kind"] for t in tasks} == {"description", "lead"}
    assert derive_tasks(default_wiki, 10, seed=1) == tasks
    sim = WikiSim(default_wiki)
    for task in tasks:
        assert task.answer.lower() not in task.question.lower() or "(" in task.answer
        assert "page not found" not in sim.visit(task.metadata["url"], "anything")
    assert masked_first_sentence("Paris", "Paris is the capital of France and its largest city. More.") == \
        "___ is the capital of France and its largest city."
    assert masked_first_sentence("Paris", "The city is nice and very old indeed.") is None
    with pytest.raises(ValueError, match="n must be"):
        derive_tasks(default_wiki, 0)


def test_env_cli_baseline_and_derive(default_wiki, tmp_path, capsys):
    from websailor.cli import main

    tasks = tmp_path / "tasks.jsonl"
    assert main(["env", "derive-tasks", "--wiki-dir", str(default_wiki), "--out", str(tasks), "--n", "6"]) == 0
    assert len(tasks.read_text().splitlines()) == 6
    out = tmp_path / "traj.jsonl"
    assert main(["env", "baseline", "--wiki-dir", str(default_wiki), "--tasks", str(tasks), "--policy", "heuristic",
                 "--limit", "4", "--out", str(out), "--tools", "search", "visit"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 4 and 0.0 <= summary["success_rate"] <= 1.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 4 and sum(r["is_correct"] for r in records) == summary["correct"]
    assert all(r["policy"] == "heuristic" and r["messages"][0]["role"] == "system" for r in records)
    assert main(["env", "baseline", "--wiki-dir", str(tmp_path), "--tasks", str(tasks)]) == 2
    assert "is not a built simulator" in capsys.readouterr().err


def test_env_over_the_gensim_sample(gensim_wiki):
    env = make_wikisim_env(gensim_wiki, [{"question": "Which sea?", "answer": "x"}], tools=["search", "visit"])
    obs, _ = env.reset(seed=0)
    obs, *_ , info = env.step(format_turn("s", tool_call=("search", {"query": ["anarchism"]})))
    assert info["tool_ok"] and "found" in obs
    env.close()
    assert isinstance(env, ResearchEnv)

