"""``websailor/WikiSim-v0``: the research environment over the offline Wikipedia simulator.

``gym.make("websailor/WikiSim-v0", wiki_dir=DIR, tasks=PATH_OR_LIST)`` builds a
:class:`envs.env.ResearchEnv` whose tools search and read a built simulator directory
(``websailor wiki build``). ``tools=None`` gives the default set ``search``, ``visit``,
``python``; ``tools`` may also list names (``["search", "visit"]``), :class:`Tool`
objects, or both.
"""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym

from envs.env import ResearchEnv
from envs.tools import registry
from envs.tools.base import Tool
from envs.wrappers import check_seconds, with_episode_limit

DEFAULT_TOOLS = registry.SIM_DEFAULT_TOOLS

# A process forked from this one (a sub-environment of ``AsyncVectorEnv``/``make_vec``, whose
# start method on Linux is fork) marks every object it inherits as permanent for the cyclic
# garbage collector, as the Python documentation advises for gc.freeze: a collection would
# otherwise write to each inherited object's header and so copy nearly every page of the
# parent's heap into each child (measured: 13 MB per sub-environment). Reference counting still
# frees inherited objects; only cycles among them are not collected in the child.
os.register_at_fork(after_in_child=gc.freeze)


def build_tools(sim: Any, tools: Sequence[str | Tool] | None) -> tuple[list[Tool], list[Any]]:
    """The tool objects for ``tools`` (names or objects) over ``sim``, and those built here
    (the environment closes them); see :func:`envs.tools.registry.build_tools`."""
    return registry.build_tools(tools, sim=sim, defaults=DEFAULT_TOOLS)


class _SharedSims:
    """One :class:`wiki_sim.WikiSim` per simulator directory per process, reference-counted:
    every environment over the same directory shares it (and its search and visit caches, so
    the G rollouts of a GRPO group hit the cache), and the last environment to close closes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sims: dict[str, list[Any]] = {}  # resolved path -> [sim, refcount]

    def acquire(self, wiki_dir: str | os.PathLike, retriever: str = "bm25") -> tuple[Any, Callable[[], None]]:
        """The shared simulator for ``wiki_dir`` searching with ``retriever``, and the function
        that releases it (once)."""
        from wiki_sim import WikiSim  # Whoosh is imported only when an environment is made

        key = str(Path(wiki_dir).resolve()) if retriever == "bm25" else f"{Path(wiki_dir).resolve()}#{retriever}"
        with self._lock:
            entry = self._sims.get(key)
            if entry is None:
                entry = self._sims[key] = [WikiSim(wiki_dir, retriever=retriever), 0]
            entry[1] += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                entry[1] -= 1
                last = entry[1] == 0
                if last and self._sims.get(key) is entry:
                    del self._sims[key]
            if last:
                _close(entry[0])

        return entry[0], release

    def open_count(self) -> int:
        """How many simulators are open (for tests)."""
        with self._lock:
            return len(self._sims)


SHARED_SIMS = _SharedSims()


def make_wikisim_env(wiki_dir: str | os.PathLike, tasks: str | os.PathLike | Sequence[dict],
                     tools: Sequence[str | Tool] | None = None, *, share_sim: bool = True,
                     max_episode_seconds: float | None = None, compact: Any = None, retriever: str = "bm25",
                     **kwargs: Any) -> gym.Env:
    """The research environment over the simulator in ``wiki_dir``.

    ``share_sim`` (default) uses the process's one :class:`wiki_sim.WikiSim` for
    ``wiki_dir``, shared with every other environment over it and closed with the last of
    them; ``share_sim=False`` opens a private one. ``retriever`` is the search tool's ranking:
    ``"bm25"`` (default), ``"dense"`` or ``"hybrid"`` (see :class:`wiki_sim.WikiSim`; the last two
    need a simulator built with ``--retriever dense|hybrid``). ``max_episode_seconds`` wraps the
    environment in :class:`envs.wrappers.EpisodeTimeLimit` (``termination="time_limit"``).
    ``compact`` (``True``, a :class:`envs.compact.CompactConfig` or a mapping of its fields) gives
    the compact setting: short prompt, top-k search, short visits, its budgets; explicit
    arguments win over it. Other keyword arguments go to :class:`envs.env.ResearchEnv` (``max_tool_calls``,
    ``max_context_tokens``, ``tokenizer``, ``reward_weights``, ``judge``, ...).
    """
    if wiki_dir is None:
        raise ValueError("wiki_dir is required: the simulator directory built by `websailor wiki build`")
    check_seconds(max_episode_seconds)
    setting = None
    if compact is not None and compact is not False:
        from envs.compact import CompactConfig

        setting = CompactConfig.coerce(compact)
        kwargs = {**setting.env_defaults(), **kwargs}
    if share_sim:
        sim, release = SHARED_SIMS.acquire(wiki_dir, retriever)
    else:
        from wiki_sim import WikiSim  # Whoosh is imported only when an environment is made

        sim = WikiSim(wiki_dir, retriever=retriever)
        release = sim.close
    try:
        if setting is not None and tools is None:
            from envs.compact import compact_tools

            tool_objects, owned = compact_tools(sim, setting), []
        else:
            tool_objects, owned = build_tools(sim, tools)
        env = ResearchEnv(tool_objects, tasks, **kwargs)
    except BaseException:
        release()
        raise
    for obj in owned:
        if callable(getattr(obj, "close", None)):
            env.add_closer(obj.close)
    env.add_closer(release)
    env.simulator = sim  # the WikiSim the tools read, for callers that need more of it (synthesis)
    return with_episode_limit(env, max_episode_seconds)


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()
