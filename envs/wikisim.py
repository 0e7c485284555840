"""``websailor/WikiSim-v0``: the research environment over the offline Wikipedia simulator.

``gym.make("websailor/WikiSim-v0", wiki_dir=DIR, tasks=PATH_OR_LIST)`` builds a
:class:`envs.env.ResearchEnv` whose tools search and read a built simulator directory
(``websailor wiki build``). ``tools=None`` gives the default set ``search``, ``visit``,
``python``; ``tools`` may also list names (``["search", "visit"]``), :class:`Tool`
objects, or both.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from envs.env import ResearchEnv
from envs.tools import registry
from envs.tools.base import Tool
from envs.tools.search import SearchTool  # noqa: F401  (the tools moved to envs.tools; old imports keep working)
from envs.tools.visit import SEPARATOR as VISIT_SEPARATOR  # noqa: F401
from envs.tools.visit import VisitTool  # noqa: F401

DEFAULT_TOOLS = registry.SIM_DEFAULT_TOOLS


def build_tools(sim: Any, tools: Sequence[str | Tool] | None) -> tuple[list[Tool], list[Any]]:
    """The tool objects for ``tools`` (names or objects) over ``sim``, and those built here
    (the environment closes them); see :func:`envs.tools.registry.build_tools`."""
    return registry.build_tools(tools, sim=sim, defaults=DEFAULT_TOOLS)


def make_wikisim_env(wiki_dir: str | os.PathLike, tasks: str | os.PathLike | Sequence[dict],
                     tools: Sequence[str | Tool] | None = None, **kwargs: Any) -> ResearchEnv:
    """The research environment over the simulator in ``wiki_dir``.

    Other keyword arguments go to :class:`envs.env.ResearchEnv` (``max_tool_calls``,
    ``max_context_tokens``, ``tokenizer``, ``reward_weights``, ``judge``, ...).
    """
    from wiki_sim import WikiSim  # Whoosh is imported only when an environment is made

    if wiki_dir is None:
        raise ValueError("wiki_dir is required: the simulator directory built by `websailor wiki build`")
    sim = WikiSim(wiki_dir)
    try:
        tool_objects, owned = build_tools(sim, tools)
        env = ResearchEnv(tool_objects, tasks, **kwargs)
    except BaseException:
        _close(sim)
        raise
    for obj in [*owned, sim]:
        if callable(getattr(obj, "close", None)):
            env.add_closer(obj.close)
    return env


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()
