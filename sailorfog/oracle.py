"""Solvability: an oracle agent that proves a task can be solved with the environment's own tools.

The oracle plays an episode of ``websailor/WikiSim-v0`` in the turn protocol, as a policy
that knows the subgraph: it searches a clue's distinctive words (or the recorded
discovery query) until the page of the entity the clue describes is among the hits,
reads it, then walks the subgraph's edges: it visits a neighbour directly when the page
it read names it, and otherwise searches for it (with the neighbour's recorded discovery
query among the queries). Every clue's evidence must appear in what the tools returned
and the answer must be judged correct, or the task is dropped. The transcript is a gold
trajectory (short, action-oriented thoughts) in the DESIGN trajectory format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import networkx as nx

from envs.baselines import parse_search_results, parse_visit_pages
from envs.protocol import format_turn
from envs.tasks import task_from_dict
from envs.trajectory import trajectory_record
from sailorfog.clues import Clue, ClueSet
from sailorfog.constraints import unary_size
from sailorfog.corpus import CorpusIndex
from sailorfog.text import content_words, display_title, mask, numbers, stem_leaks
from sailorfog.writers import render
from wiki_sim.records import title_to_url

MAX_SEARCHES_PER_NODE = 2


@dataclass
class OracleResult:
    """The oracle's episode."""

    solved: bool
    reason: str = ""
    record: dict[str, Any] | None = None
    """The gold trajectory record (``policy="oracle"``)."""
    tool_calls: int = 0
    evidence: dict[str, int] = field(default_factory=dict)
    """clue id -> the tool call (1-based) whose response holds its evidence."""


class _Episode:
    """One oracle episode: steps the environment and keeps what each visited page said."""

    def __init__(self, env: Any, task: Mapping[str, Any]):
        self.env = env
        self.obs, _ = env.reset(options={"task": dict(task)})
        self.pages: dict[str, list[tuple[str, int]]] = {}  # url -> [(text, tool call)] of every visit
        self.calls = 0
        self.info: dict[str, Any] = {}
        self.reward = 0.0

    def search(self, queries: list[str], thought: str) -> list[str]:
        self._step(format_turn(thought, tool_call=("search", {"query": queries})))
        return [h.url for h in parse_search_results(self.obs)]

    def visit(self, url: str, goal: str, thought: str) -> str:
        self._step(format_turn(thought, tool_call=("visit", {"url": [url], "goal": goal})))
        text = next(iter(parse_visit_pages(self.obs).values()), "")
        self.pages.setdefault(url, []).append((text, self.calls))
        return text

    def answer(self, answer: str, thought: str) -> None:
        obs, reward, terminated, truncated, info = self.env.step(format_turn(thought, answer=answer))
        self.reward, self.info = float(reward), info

    def _step(self, action: str) -> None:
        self.obs, _, terminated, truncated, self.info = self.env.step(action)
        self.calls += 1
        if terminated or truncated:
            raise _Stop(f"the episode ended early ({self.info.get('termination')})")


class _Stop(Exception):
    pass


def _clue_words(cs: ClueSet, label: str) -> list[tuple[int, list[str]]]:
    """(candidate count, words) of the word checks about ``label``."""
    return [(0, c["words"]) for clue in cs.clues for c in clue.checks
            if c["type"] in ("words", "description") and c.get("node") == label]


def _start_order(cs: ClueSet, index: CorpusIndex) -> list[tuple[str, list[str]]]:
    """Labels with word clues, most specific first, with their words."""
    options = []
    for label in sorted(cs.titles):
        for _, words in _clue_words(cs, label):
            options.append((unary_size(index, {"type": "words", "words": list(words)}), label, words))
    return [(label, words) for _, label, words in sorted(options)]


def _goal(cs: ClueSet, label: str) -> str:
    texts = [render(c.text) for c in cs.clues if "{" + label + "}" in c.text]
    goal = " ".join(texts)[:400]
    return goal or "Find what this page says about the entity described in the question."


def _names(title: str, aliases: Mapping[str, Sequence[str]]) -> list[str]:
    return [n for n in {title, display_title(title), *aliases.get(title, ())} if len(n) >= 3]


def _named_in(text: str, title: str, aliases: Mapping[str, Sequence[str]]) -> bool:
    return mask(text, _names(title, aliases), "\x00") != text


def _evidence_ok(clue: Clue, text: str) -> bool:
    """Whether a tool response holds the clue's evidence (its words, years and numbers)."""
    words = [w for c in clue.checks if c["type"] in ("words", "description") for w in c["words"]]
    words += [w for c in clue.checks if c["type"] == "fact" for w in content_words(c["value"], limit=6)]
    if words and len(stem_leaks(text, words)) < 0.8 * len(words):
        return False
    values = set(numbers(text))
    for span in clue.spans:
        if float(span["value"]) not in values:
            return False
    return True


@dataclass
class _Need:
    """One piece of evidence a clue needs: a page, what its text must show, and a goal to re-read it with."""

    url: str
    title: str
    ok: Callable[[str], bool]
    sentence: str
    fallback_goal: str = ""
    """The goal of a re-read when no sentence is known (a year: what happened then)."""


def _year_sentence(G: nx.Graph, title: str, year: int) -> str:
    dates = (G.nodes[title].get("dates") or []) if title in G else []
    return next((d.get("sentence", "") for d in dates if d.get("year") == year), "")


def _needs(clue: Clue, cs: ClueSet, G: nx.Graph, index: CorpusIndex) -> list[_Need]:
    """What the oracle must read for ``clue``: its evidence sentence's words and values, and for a
    comparison or relative date the years on every page compared."""
    url_of = lambda t: (G.nodes[t].get("url") if t in G else "") or title_to_url(t)  # noqa: E731
    years_of: dict[str, set[int]] = {}
    for check in clue.checks:
        if check["type"] == "earlier":
            for label in (check["node"], check["other"]):
                title = cs.titles[label]
                years_of.setdefault(title, set()).add(index.page_min_year[index.ids[title]])
        elif check["type"] == "relyear" and check.get("years"):  # the two dates the clue was made from
            years_of.setdefault(cs.titles[check["node"]], set()).add(int(check["years"][0]))
            years_of.setdefault(cs.titles[check["ref"]], set()).add(int(check["years"][1]))
    needs = [_Need(url_of(t), t, lambda text, y=y: float(y) in numbers(text), _year_sentence(G, t, y),
                   f"what happened in {y}")
             for t, ys in sorted(years_of.items()) for y in sorted(ys)]
    title = clue.evidence.get("title") or cs.target
    needs.append(_Need(url_of(title), title, lambda text: _evidence_ok(clue, text), clue.evidence.get("sentence", "")))
    return needs


def _find_evidence(ep: _Episode, need: _Need, clue_id: str) -> int | None:
    """The tool call whose response shows ``need``; on a long page whose goal-focused excerpt
    missed it, one more visit with the evidence's own words as the goal."""
    visits = ep.pages.get(need.url)
    if not visits:
        return None
    for text, call in visits:
        if need.ok(text):
            return call
    goal = " ".join(content_words(need.sentence, limit=12)) or need.sentence[:200] or need.fallback_goal
    if not goal:
        return None
    text = ep.visit(need.url, goal, f"The excerpt of {display_title(need.title)} missed the statement behind "
                                    f"clue {clue_id}; read the page again for it.")
    return ep.calls if need.ok(text) else None


def run_oracle(env: Any, task: Mapping[str, Any], cs: ClueSet, G: nx.Graph, edges: Sequence[tuple[str, str]],
               index: CorpusIndex, aliases: Mapping[str, Sequence[str]] | None = None) -> OracleResult:
    """Play the oracle on ``task`` in ``env`` (a WikiSim environment); see the module docstring."""
    aliases = aliases or {}
    ep = _Episode(env, task)
    try:
        visited = _walk(ep, cs, G, edges, index, aliases)
    except _Stop as stop:
        return OracleResult(False, str(stop), tool_calls=ep.calls)
    if visited is None:
        return OracleResult(False, "no search found a page to start from", tool_calls=ep.calls)
    evidence: dict[str, int] = {}
    try:
        for clue in cs.clues:
            for need in _needs(clue, cs, G, index):
                found = _find_evidence(ep, need, clue.id)
                if found is None:
                    return OracleResult(False, f"no evidence reached for clue {clue.id}", tool_calls=ep.calls)
                evidence[clue.id] = max(found, evidence.get(clue.id, 0))
    except _Stop as stop:
        return OracleResult(False, str(stop), tool_calls=ep.calls)
    ep.answer(cs.answer, f"Every clue checks out against the pages read; X is {cs.answer}.")
    if not ep.info.get("is_correct"):
        return OracleResult(False, "the environment judged the oracle's answer wrong", tool_calls=ep.calls)
    record = trajectory_record(task_from_dict(task), ep.env.unwrapped.messages(), ep.reward, ep.info, "oracle")
    return OracleResult(True, "", record, ep.calls, evidence)


def _walk(ep: _Episode, cs: ClueSet, G: nx.Graph, edges: Sequence[tuple[str, str]], index: CorpusIndex,
          aliases: Mapping[str, Sequence[str]]) -> set[str] | None:
    labels = cs.labels
    url_of = {t: G.nodes[t].get("url") or title_to_url(t) for t in cs.titles.values()}
    start = None
    for label, words in _start_order(cs, index)[:2]:
        title = cs.titles[label]
        query = (G.nodes[title].get("provenance") or {}).get("query")
        tries = [(" ".join(words), f"Search for the distinctive words of the clue about {label}."),
                 (query, f"Try the query that describes {label} differently.")]
        for q, thought in tries:
            if q and url_of[title] in ep.search([q], thought):
                start = title
                break
        if start is not None:
            break
    if start is None:
        return None
    ep.visit(url_of[start], _goal(cs, labels[start]),
             f"The hit {display_title(start)} matches the clue about {labels[start]}; read it.")
    visited = {start}
    adjacency: dict[str, set[str]] = {t: set() for t in cs.titles.values()}
    for u, v in edges:
        adjacency[u].add(v)
        adjacency[v].add(u)
    while len(visited) < len(cs.titles):
        frontier = sorted({n for v in visited for n in adjacency[v]} - visited, key=lambda t: labels[t])
        if not frontier:
            raise _Stop("the subgraph is not connected")
        texts = {t: " ".join(text for text, _ in ep.pages[url_of[t]]) for t in visited}
        named = [n for n in frontier if any(_named_in(texts[v], n, aliases) for v in visited)]
        node = named[0] if named else frontier[0]
        label = labels[node]
        if not named:
            parent = next(v for v in sorted(visited, key=lambda t: labels[t]) if node in adjacency[v])
            words = next((w for _, w in _clue_words(cs, label)), [])
            query = (G.nodes[node].get("provenance") or {}).get("query")
            tries = [q for q in (" ".join(words), f"{display_title(parent)} {' '.join(words[:3])}".strip(), query)
                     if q]
            for q in list(dict.fromkeys(tries))[:MAX_SEARCHES_PER_NODE]:
                if url_of[node] in ep.search([q], f"Look for the entity {label} linked to {display_title(parent)}."):
                    break
            else:
                raise _Stop(f"no search reached the page of {label}")
            thought = f"The hit {display_title(node)} fits {label}; read it."
        else:
            thought = f"The page names {display_title(node)}, a candidate for {label}; read it."
        ep.visit(url_of[node], _goal(cs, label), thought)
        visited.add(node)
    return visited
