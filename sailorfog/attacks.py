"""Attackers that measure whether a question needs research.

:func:`shortcut_ranks` asks whether one search finds the answer: the whole question as one
query, the best single sentence or clause, the best 6-word window. :class:`ClauseAgent` is a
stronger scripted agent than :class:`envs.baselines.HeuristicAgent`: it searches every clause,
reads the top hits, searches again from the pages it read for the asked kind of entity, and
answers the candidate that the most clues support (their intersection).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from envs.baselines import parse_search_results, parse_visit_pages, question_of
from envs.protocol import format_turn

WINDOW = 6
_SPLIT = re.compile(r"(?<=[.?!;])\s+|,\s+(?:and\s+)?|\s+and\s+(?=whose|which|who|that)")
_ASK = re.compile(r"(?:What|Which|Who) (?:is|was) (?:this|the \w+) ([\w-]+)\?|Which ([\w-]+) is it\?|"
                  r"Name (?:this|the \w+) ([\w-]+)\.", re.I)
_WORD = re.compile(r"\w+")


def clauses(question: str) -> list[str]:
    """Sentences and clauses of a question (the closing ask left out), longest first."""
    parts = [p.strip(" .?") for p in _SPLIT.split(question) if len(_WORD.findall(p)) >= 3]
    parts = [p for p in parts if not _ASK.fullmatch(p.strip() + "?") and not p.lower().startswith(("name this",))]
    return sorted(dict.fromkeys(parts), key=lambda p: -len(p))


def windows(question: str, n: int = WINDOW) -> list[str]:
    words = _WORD.findall(question)
    return list(dict.fromkeys(" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))))


def asked_kind(question: str) -> str:
    """The kind of entity the question asks for ("plant" in "What is this plant?"), or ""."""
    found = _ASK.findall(question)
    if not found:
        return ""
    return next((g for g in found[-1] if g), "").lower()


def _best_rank(sim: Any, queries: Sequence[str], answers: set[str]) -> int | None:
    best = None
    for start in range(0, len(queries), 32):
        for hits in sim.search(list(queries[start:start + 32]), k=10):
            for rank, hit in enumerate(hits, 1):
                if hit.title in answers and (best is None or rank < best):
                    best = rank
    return best


def shortcut_ranks(sim: Any, question: str, answers: Iterable[str]) -> dict[str, int | None]:
    """The answer's best rank in the top 10 for (a) the whole question, (b) the best clause,
    (c) the best 6-word window (``None``: not in the top 10)."""
    answers = set(answers)
    return {"whole": _best_rank(sim, [question], answers),
            "clause": _best_rank(sim, clauses(question) or [question], answers),
            "window": _best_rank(sim, windows(question), answers)}


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 3}


@dataclass
class ClauseAgent:
    """Search each clause, read the top hits, search from them for the asked kind, answer the
    candidate supported by the most clues."""

    reads: int = 4
    """Pages read after the clause searches."""
    name: str = "clause-agent"
    _question: str = field(default="", init=False)
    _kind: str = field(default="", init=False)
    _phase: int = field(default=0, init=False)
    _scores: Counter = field(default_factory=Counter, init=False)
    _urls: dict[str, str] = field(default_factory=dict, init=False)
    _read: dict[str, str] = field(default_factory=dict, init=False)
    _snippets: dict[str, str] = field(default_factory=dict, init=False)

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self._question = question_of(obs)
        self._kind = asked_kind(self._question)
        self._phase, self._scores, self._urls, self._read, self._snippets = 0, Counter(), {}, {}, {}

    def _hits(self, obs: str, weight: float) -> None:
        for hit in parse_search_results(obs):
            self._urls.setdefault(hit.title, hit.url)
            self._snippets.setdefault(hit.title, hit.snippet)
            self._scores[hit.title] += weight / hit.rank

    def _is_kind(self, title: str) -> bool:
        text = self._read.get(title) or self._snippets.get(title, "")
        return bool(self._kind) and self._kind in text.lower()[:300]

    def act(self, obs: str, info: dict[str, Any]) -> str:
        self._phase += 1
        if info.get("final_turn"):
            return self._answer()
        if self._phase == 1:
            queries = clauses(self._question)[:8] or [self._question]
            return format_turn("Search every clue separately.", tool_call=("search", {"query": queries}))
        if self._phase == 2:
            self._hits(obs, 1.0)
            top = [t for t, _ in self._scores.most_common(self.reads)]
            if not top:
                return self._answer()
            return format_turn("Read the pages most clues point to.",
                               tool_call=("visit", {"url": [self._urls[t] for t in top], "goal": self._question}))
        if self._phase == 3:
            by_url = {u: t for t, u in self._urls.items()}
            for url, text in parse_visit_pages(obs).items():
                self._read[by_url.get(url, url)] = text
            queries = [f"{t} {self._kind}".strip() for t in list(self._read)[:4]]
            return format_turn(f"Look for the {self._kind or 'entity'} related to the pages read.",
                               tool_call=("search", {"query": queries}))
        if self._phase == 4:
            self._hits(obs, 1.0)
            for title in list(self._scores):  # the intersection: named by a page read, of the asked kind
                named = sum(title.lower() in text.lower() for t, text in self._read.items() if t != title)
                self._scores[title] += named + (2.0 if self._is_kind(title) else 0.0)
            top = [t for t, _ in self._scores.most_common(self.reads) if t not in self._read]
            if not top:
                return self._answer()
            return format_turn("Check the best candidates.",
                               tool_call=("visit", {"url": [self._urls[t] for t in top], "goal": self._question}))
        by_url = {u: t for t, u in self._urls.items()}
        for url, text in parse_visit_pages(obs).items():
            title = by_url.get(url, url)
            self._read[title] = text
            self._scores[title] += 1.0 if self._is_kind(title) else -1.0
        return self._answer()

    def _answer(self) -> str:
        q = _terms(self._question)
        for title in self._scores:
            if _terms(title) and _terms(title) <= q:  # a page the question names is not its answer
                self._scores[title] -= 5.0
        if not self._scores:
            return format_turn("Nothing found.", answer="unknown")
        best = max(self._scores, key=lambda t: (self._scores[t], t))
        return format_turn(f"{best} fits the most clues.", answer=re.sub(r"\s*\([^)]*\)$", "", best))
