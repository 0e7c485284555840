"""Gold trajectories from the offline simulator, for SFT until the synthesis oracle exists.

The heuristic agent of :mod:`envs.baselines` plays derived title-lookup tasks
(:mod:`envs.derived_tasks`) in ``websailor/WikiSim-v0``; its episodes, strictly formatted,
are recorded in the trajectory JSONL format. ``compact=True`` keeps transcripts short
enough for a tiny byte-level model on CPU: a short system prompt, the top ``search_k``
hits per query with cut snippets and one short page visit (tools over the same simulator,
passed to ``gym.make`` as Tool objects).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from envs.formatting import format_search_batch
from envs.tools.base import ToolResult

COMPACT_SYSTEM_PROMPT = (
    "You answer questions by searching and reading Wikipedia.\n<tools>\n"
    '{"name": "search", "arguments": {"query": ["..."]}}\n'
    '{"name": "visit", "arguments": {"url": ["..."], "goal": "..."}}\n'
    "</tools>\nEvery turn is <think>your reasoning</think> followed by exactly one of "
    "<tool_call>\n{\"name\": ..., \"arguments\": {...}}\n</tool_call> or <answer>the article's title</answer>."
)


COMPACT_MAX_QUERIES = 1
"""Queries per search call in the compact environment; the gold agent writes no more than that."""


class TopKSearch:
    """The simulator's batched search with ``k`` hits per query, snippets cut to ``snippet_chars``
    (same output format as the environment's ``search``)."""

    name = "search"
    description = "Performs batched web searches: supply an array 'query'; returns the top hits of each."
    parameters = {"type": "object", "properties": {"query": {"type": "array", "items": {"type": "string"}}},
                  "required": ["query"]}

    def __init__(self, sim: Any, k: int = 2, max_queries: int = COMPACT_MAX_QUERIES, snippet_chars: int = 100):
        self.sim, self.k, self.max_queries, self.snippet_chars = sim, k, max_queries, snippet_chars

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        queries = arguments.get("query", arguments.get("queries"))
        if isinstance(queries, str):
            queries = [queries]
        if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
            return ToolResult('Error: search needs "query", a list of strings.', ok=False)
        queries = [q[:300] for q in queries[:self.max_queries]]
        results = [[{"title": h.title, "url": h.url, "snippet": h.snippet[:self.snippet_chars]} for h in hits]
                   for hits in self.sim.search(queries, k=self.k)]
        return ToolResult(format_search_batch(queries, results))


class ShortVisit:
    """The simulator's goal-focused page reading, cut to ``max_chars`` per page."""

    name = "visit"
    description = "Visit webpage(s) and return the evidence for the goal."
    parameters = {"type": "object", "properties": {"url": {"type": "array", "items": {"type": "string"}},
                                                   "goal": {"type": "string"}}, "required": ["url", "goal"]}

    def __init__(self, sim: Any, max_urls: int = 1, max_chars: int = 200):
        self.sim, self.max_urls, self.max_chars = sim, max_urls, max_chars

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        urls, goal = arguments.get("url"), arguments.get("goal")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls) \
                or not isinstance(goal, str):
            return ToolResult('Error: visit needs "url", a list of strings, and "goal", a string.', ok=False)
        pages = [self.sim.visit(url[:2000], goal[:500])[:self.max_chars] for url in urls[:self.max_urls]]
        return ToolResult("\n=======\n".join(pages))


def make_env(wiki_dir: str | os.PathLike, tasks: Sequence[dict], *, compact: bool = True, **kwargs: Any) -> Any:
    """``gym.make("websailor/WikiSim-v0", ...)`` over ``tasks``; ``compact`` gives the short system
    prompt and the cut-down search and visit tools above (same simulator, same formats)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)

    if not compact:
        return gym.make("websailor/WikiSim-v0", wiki_dir=wiki_dir, tasks=list(tasks), **kwargs)
    from wiki_sim import WikiSim

    sim = WikiSim(wiki_dir)
    env = gym.make("websailor/WikiSim-v0", wiki_dir=wiki_dir, tasks=list(tasks),
                   tools=[TopKSearch(sim), ShortVisit(sim)], system_prompt=COMPACT_SYSTEM_PROMPT,
                   current_date="2025-01-01", **kwargs)
    env.unwrapped.add_closer(sim.close)
    return env


def heuristic_trajectories(env: Any, num_tasks: int, *, visits: int = 1,
                           max_queries: int = COMPACT_MAX_QUERIES) -> list[dict[str, Any]]:
    """Trajectory records of the heuristic agent on the env's first ``num_tasks`` tasks.

    ``max_queries`` defaults to what the compact search reads: the extra queries the agent would
    otherwise write are ignored by the tool, yet they are the longest spans a tiny model has to
    copy from the question, and its failures are repetition loops in such copies."""
    from envs.baselines import HeuristicAgent, run_episode
    from envs.trajectory import trajectory_record

    agent = HeuristicAgent(visits=visits, max_queries=max_queries)
    records = []
    for i in range(num_tasks):
        reward, info = run_episode(env, agent, options={"task_index": i})
        records.append(trajectory_record(env.unwrapped.task, env.unwrapped.messages(), reward, info,
                                         policy="heuristic"))
    return records
