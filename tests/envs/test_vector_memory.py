"""What each sub-environment of a vector environment holds privately (issue 23): forked
workers leave their inherited heap to the collector's permanent generation, and stepping
builds no per-process charset tables."""

from __future__ import annotations

import gc
import multiprocessing
import os

import envs.wikisim  # noqa: F401  (registers the freeze of forked children)
from envs import spaces
from envs.baselines import HeuristicAgent
from envs.env import ResearchEnv
from envs.tools.search import SearchTool
from envs.tools.visit import VisitTool

from .conftest import TASKS, EchoTool, MiniWiki


def _freeze_count(queue) -> None:
    queue.put(gc.get_freeze_count())


def test_forked_sub_environments_freeze_what_they_inherit_and_the_parent_does_not():
    before = gc.get_freeze_count()
    inherited = [[] for _ in range(1000)]  # objects the collector tracks, alive at the fork
    ctx = multiprocessing.get_context("fork")  # AsyncVectorEnv's default start method on Linux
    queue = ctx.Queue()
    child = ctx.Process(target=_freeze_count, args=(queue,))
    child.start()
    frozen = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and frozen >= len(inherited)  # a collection in the child leaves them be
    assert gc.get_freeze_count() == before  # the parent's own collection is unchanged
    r, w = os.pipe()
    pid = os.fork()  # a plain fork too (the hook is the interpreter's, whatever forks)
    if pid == 0:
        os.write(w, str(gc.get_freeze_count()).encode())
        os._exit(0)
    os.close(w)
    assert int(os.read(r, 64)) >= len(inherited)
    os.waitpid(pid, 0)
    os.close(r)


def test_stepping_an_environment_builds_no_charset_tables():
    spaces._tables.cache_clear()
    wiki = MiniWiki()
    env = ResearchEnv([SearchTool(wiki), VisitTool(wiki), EchoTool()], TASKS, current_date="2025-07-18")
    agent = HeuristicAgent()
    obs, info = env.reset(seed=0)
    agent.reset(obs, info)
    for _ in range(3):
        obs, _, terminated, truncated, _ = env.step(agent.act(obs, {}))
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            break
    assert spaces._tables.cache_info().currsize == 0  # 10 MiB per process, never needed to step
    assert "\t" in env.observation_space.character_set and len(env.observation_space.sample()) >= 0
    assert spaces._tables.cache_info().currsize == 1  # built on first use
    env.close()
