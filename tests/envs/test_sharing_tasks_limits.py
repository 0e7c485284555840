"""What trainers need from the environments: one shared simulator, one task per
sub-environment, task files in epochs, and a wall-clock limit per episode."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import SyncVectorEnv

from envs.env import ResearchEnv
from envs.protocol import format_turn
from envs.task_schedule import group_assignment, iter_task_epochs
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool
from envs.wikisim import SHARED_SIMS
from envs.wrappers import EpisodeTimeLimit, with_episode_limit

from .conftest import TASKS, MiniWiki

SEARCH = format_turn("look", tool_call=("search", {"query": ["Epsom Derby 1964"]}))
ANSWER = format_turn("done", answer="Santa Claus")


def _make():
    wiki = MiniWiki()
    return ResearchEnv([SearchTool(wiki), VisitTool(wiki)], TASKS, current_date="2025-07-18")


def _sim(env):
    return env.unwrapped.tools[0].sim


def test_one_shared_simulator_per_directory(gensim_wiki):
    tasks = [{"question": "Which country?", "answer": "x"}]
    before = SHARED_SIMS.open_count()
    a = gym.make("websailor/WikiSim-v0", wiki_dir=gensim_wiki, tasks=tasks, tools=["search", "visit"])
    b = gym.make("websailor/WikiSim-v0", wiki_dir=str(gensim_wiki), tasks=tasks, tools=["search"])
    private = gym.make("websailor/WikiSim-v0", wiki_dir=gensim_wiki, tasks=tasks, tools=["search"], share_sim=False)
    try:
        assert _sim(a) is _sim(b) and _sim(private) is not _sim(a)
        assert SHARED_SIMS.open_count() == before + 1
        for env in (a, b):  # the second environment's identical search is a cache hit
            env.reset(seed=0)
            env.step(format_turn("t", tool_call=("search", {"query": ["anarchism philosophy"]})))
        assert _sim(a).stats()["search_cache"]["hits"] >= 1
        a.close()
        a.close()  # closing twice releases once
        assert SHARED_SIMS.open_count() == before + 1
        obs, *_ = b.step(format_turn("t", tool_call=("search", {"query": ["algebra"]})))
        assert "<tool_response>" in obs
    finally:
        for env in (a, b, private):
            env.close()
    assert SHARED_SIMS.open_count() == before


def test_next_task_per_sub_environment_including_autoreset():
    envs = SyncVectorEnv([_make] * 4)
    try:
        order = group_assignment([TASKS[0], TASKS[2]], group_size=2)
        assert [t["id"] for t in order] == ["horse", "horse", "capital", "capital"]
        envs.set_attr("next_task", order)
        envs.reset(seed=1)
        assert [t.id for t in envs.get_attr("task")] == ["horse", "horse", "capital", "capital"]
        assert envs.get_attr("next_task") == (None,) * 4  # used once
        envs.set_attr("next_task", [TASKS[1]] * 4)
        envs.step((ANSWER,) * 4)  # every episode ends; the next step autoresets onto next_task
        envs.step((ANSWER,) * 4)
        assert [t.id for t in envs.get_attr("task")] == ["sdo"] * 4
    finally:
        envs.close()


def test_task_epochs_are_reproducible_permutations():
    tasks = [{"id": str(i), "question": f"q{i}", "answer": "a"} for i in range(7)]
    run = [(e, t.id) for e, t in iter_task_epochs(tasks, epochs=3, seed=5)]
    assert run == [(e, t.id) for e, t in iter_task_epochs(tasks, epochs=3, seed=5)]
    assert [e for e, _ in run] == [0] * 7 + [1] * 7 + [2] * 7
    epochs = [[i for e, i in run if e == k] for k in range(3)]
    assert all(sorted(ids) == sorted(t["id"] for t in tasks) for ids in epochs) and epochs[0] != epochs[1]
    assert [t.id for _, t in iter_task_epochs(tasks, epochs=1, shuffle=False)] == [t["id"] for t in tasks]
    endless = iter_task_epochs(tasks, epochs=None)
    assert len([next(endless) for _ in range(30)]) == 30
    with pytest.raises(ValueError, match="epochs"):
        list(iter_task_epochs(tasks, epochs=0))
    with pytest.raises(ValueError, match="group_size"):
        group_assignment(tasks, 0)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_episode_time_limit_truncates():
    clock = FakeClock()
    env = EpisodeTimeLimit(_make(), 30, clock=clock)
    env.reset(options={"task_index": 0})
    clock.now += 10
    obs, reward, terminated, truncated, info = env.step(SEARCH)
    assert not (terminated or truncated) and env.elapsed_seconds == 10
    clock.now += 25
    obs, reward, terminated, truncated, info = env.step(SEARCH)
    assert (obs, reward, terminated, truncated, info["termination"]) == ("", 0.0, False, True, "time_limit")
    with pytest.raises(ResetNeeded):
        env.step(ANSWER)
    env.reset(options={"task_index": 0})  # a fresh episode has its full budget
    clock.now += 29
    assert env.step(ANSWER)[2] is True
    clock.now += 100  # no time limit after the episode ended
    assert env.reset()[1]["max_episode_seconds"] == 30


def test_time_limit_wrapper_passes_check_env_and_factories_apply_it(gensim_wiki):
    with pytest.warns(UserWarning, match="different from the unwrapped"):  # check_env's note on any wrapper
        check_env(EpisodeTimeLimit(_make(), 5), skip_render_check=True)
    assert with_episode_limit(_make(), None).__class__ is ResearchEnv
    with pytest.raises(ValueError, match="max_episode_seconds"):
        with_episode_limit(_make(), -1)
    env = gym.make("websailor/WikiSim-v0", wiki_dir=gensim_wiki, tasks=TASKS, tools=["search"],
                   max_episode_seconds=60)
    try:
        assert any(isinstance(w, EpisodeTimeLimit) for w in _wrappers(env))
        assert env.reset(seed=0)[1]["max_episode_seconds"] == 60
    finally:
        env.close()


def _wrappers(env):
    while isinstance(env, gym.Wrapper):
        yield env
        env = env.env
