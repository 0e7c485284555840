"""Gold trajectories from the offline simulator, for SFT until the synthesis oracle exists.

The heuristic agent of :mod:`envs.baselines` plays derived title-lookup tasks
(:mod:`envs.derived_tasks`) in ``websailor/WikiSim-v0``; its episodes, strictly formatted,
are recorded in the trajectory JSONL format. ``compact=True`` keeps transcripts short
enough for a tiny model on CPU (:mod:`envs.compact`: a short system prompt, the top 2 hits per
query with cut snippets, one short page visit).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from envs.compact import CompactConfig

COMPACT_MAX_QUERIES = 1
"""Queries per search call in the compact environment; the gold agent writes no more than that."""
GOLD_COMPACT = CompactConfig(search_k=2, snippet_chars=100, max_queries=COMPACT_MAX_QUERIES, visit_chars=200,
                             max_tool_calls=100, max_format_errors=3)
"""The compact setting of the tiny-model SFT benchmark: top-2 hits, 100-character snippets."""


def make_env(wiki_dir: str | os.PathLike, tasks: Sequence[dict], *, compact: bool = True, **kwargs: Any) -> Any:
    """``gym.make("websailor/WikiSim-v0", ...)`` over ``tasks``; ``compact`` gives :data:`GOLD_COMPACT`
    (:mod:`envs.compact`: the short system prompt and the cut-down search and visit tools)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)

    if compact:
        kwargs = {"compact": GOLD_COMPACT, **kwargs}
    return gym.make("websailor/WikiSim-v0", wiki_dir=wiki_dir, tasks=list(tasks), **kwargs)


def heuristic_trajectories(env: Any, num_tasks: int, *, visits: int = 1,
                           max_queries: int = COMPACT_MAX_QUERIES) -> list[dict[str, Any]]:
    """Trajectory records of the heuristic agent on the env's first ``num_tasks`` tasks.

    ``max_queries`` defaults to what the compact search reads: the extra queries the agent would
    otherwise write are ignored by the tool, yet they are the longest spans a tiny model has to
    copy from the question, and its failures are repetition loops in such copies."""
    from envs.baselines import HeuristicAgent
    from envs.episode import run_episode

    agent = HeuristicAgent(visits=visits, max_queries=max_queries)
    return [run_episode(env, agent, options={"task_index": i}).record("heuristic") for i in range(num_tasks)]
