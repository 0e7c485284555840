"""``websailor/LiveWeb-v0``: the research environment over the managed live web.

``gym.make("websailor/LiveWeb-v0", tasks=PATH_OR_LIST, config=None, tools=None, **env_kwargs)``:
``config`` is a :class:`~envs.live.config.LiveConfig`, a mapping of its fields, or a TOML/JSON
file (None: ``$WEBSAILOR_LIVE_CONFIG`` if set, else defaults and environment variables);
``base_urls`` may also be given directly. ``tools`` is None (``search``, ``visit``,
``google_scholar``, ``python``), or a list of tool names and Tool objects. Everything else
goes to :class:`envs.env.ResearchEnv` (``max_tool_calls``, ``reward_weights``, ``judge``, ...);
``max_episode_seconds`` wraps it in :class:`envs.wrappers.EpisodeTimeLimit`.
The run statistics are on ``env.unwrapped.live_web.snapshot()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from envs.live.config import LiveConfig
from envs.live.manager import LiveWeb
from envs.tools import registry

DEFAULT_TOOLS = registry.LIVE_DEFAULT_TOOLS


def make_liveweb_env(tasks: str | os.PathLike | Sequence[dict], tools: Sequence[Any] | None = None,
                     config: LiveConfig | Mapping[str, Any] | str | os.PathLike | None = None,
                     base_urls: Mapping[str, str] | None = None, max_episode_seconds: float | None = None,
                     **kwargs: Any):
    """The live-web :class:`envs.env.ResearchEnv` (see the module docstring)."""
    from envs.env import ResearchEnv

    from envs.wrappers import check_seconds, with_episode_limit

    check_seconds(max_episode_seconds)
    cfg = LiveConfig.coerce(config)
    if base_urls:
        cfg = replace(cfg, base_urls={**cfg.base_urls, **dict(base_urls)})
    web = LiveWeb(cfg)
    try:
        built, owned = registry.build_tools(tools, web=web, defaults=DEFAULT_TOOLS)
        env = ResearchEnv(built, tasks, **kwargs)
    except BaseException:
        web.close()
        raise
    env.live_web = web
    # Like envs.wikisim: the environment closes what was built here (the sandbox, the web).
    for obj in [*owned, web]:
        close = getattr(obj, "close", None)
        if callable(close):
            env.add_closer(close)
    return with_episode_limit(env, max_episode_seconds)
