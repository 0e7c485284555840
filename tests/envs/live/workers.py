"""Functions the multi-process tests run in spawned children (importable by name)."""

from __future__ import annotations

import time

from envs.live.config import LiveConfig
from envs.live.manager import LiveWeb
from envs.live.tools import LiveSearchTool


def search_many(config_fields: dict, queries: list[str], start_at: float) -> list[dict]:
    """Wait until ``start_at`` (so both processes begin together), run each query as a
    search call, and return each call's metadata."""
    live = LiveWeb(LiveConfig(**config_fields))
    tool = LiveSearchTool(live)
    time.sleep(max(0.0, start_at - time.time()))
    out = []
    for q in queries:
        result = tool({"query": [q]})
        out.append({"ok": result.ok, **result.metadata})
    live.close()
    return out
