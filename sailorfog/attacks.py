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


def _distinct(queries: Sequence[str]) -> list[str]:
    """One query per set of search terms (windows that differ only in stopwords rank the same pages)."""
    from wiki_sim.index import query_terms

    first: dict[tuple[str, ...], str] = {}
    for q in queries:
        first.setdefault(tuple(query_terms(q)) or (q,), q)
    return list(first.values())


def _best_rank(sim: Any, queries: Sequence[str], answers: set[str]) -> int | None:
    queries = _distinct(queries)
    best = None
    for start in range(0, len(queries), 32):
        for titles in sim.ranked_titles(list(queries[start:start + 32]), k=10):
            for rank, title in enumerate(titles, 1):
                if title in answers and (best is None or rank < best):
                    best = rank
    return best


def shortcut_ranks(sim: Any, question: str, answers: Iterable[str]) -> dict[str, int | None]:
    """The answer's best rank in the top 10 for (a) the whole question, (b) the best clause,
    (c) the best 6-word window (``None``: not in the top 10)."""
    answers = set(answers)
    return {"whole": _best_rank(sim, [question], answers),
            "clause": _best_rank(sim, clauses(question) or [question], answers),
            "window": _best_rank(sim, windows(question), answers)}


def first_shortcut(sim: Any, question: str, answers: Iterable[str]) -> str | None:
    """The first of ``whole``, ``clause``, ``window`` (:func:`shortcut_ranks`' order) whose search
    puts an answer in the top 10, or ``None``; the later searches are not made once one finds it."""
    answers = set(answers)
    for name, queries in (("whole", lambda: [question]), ("clause", lambda: clauses(question) or [question]),
                          ("window", lambda: windows(question))):
        if _best_rank(sim, queries(), answers) is not None:
            return name
    return None


def neighbour_titles(task: dict[str, Any]) -> list[str]:
    """Titles of the entities a task's subgraph links directly to its answer (``subgraph.edges``)."""
    sub = task.get("subgraph") or {}
    target = sub.get("target") or task.get("answer")
    found = [e["target"] if e.get("source") == target else e.get("source") for e in sub.get("edges") or []
             if target in (e.get("source"), e.get("target"))]
    return list(dict.fromkeys(t for t in found if t and t != target))


def answer_kind(task: dict[str, Any]) -> str:
    """The type a task's question states for its answer (the ``X`` type clue), or ""."""
    return next((str(c.get("value") or "") for c in task.get("clues") or []
                 if c.get("kind") == "type" and c.get("subject") == "X"), "")


def type_neighbour_rank(sim: Any, kind: str, neighbours: Iterable[str], answers: Iterable[str]) -> int | None:
    """The answer's best rank in the top 10 when the asked type is searched with one neighbouring
    entity's title ("officer Burkina Faso"): what a reader searches once knowledge names a neighbour.
    ``None``: no such search lists it (or there is no type or neighbour to search)."""
    from sailorfog.text import display_title

    queries = [f"{kind} {display_title(n)}".strip() for n in neighbours] if kind else []
    return _best_rank(sim, queries, set(answers)) if queries else None


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 3}


_NAME = re.compile(r"\b[A-Z][\w'-]+(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'-]+){0,3}")
_NUMBERS = {"single": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def sentence_constraints(sentence: str) -> tuple[str | None, int | None]:
    """The first letter and word count a sentence gives a name."""
    return name_constraints(sentence, "", any_kind=True)


def name_constraints(question: str, kind: str, any_kind: bool = False) -> tuple[str | None, int | None]:
    """The first letter and word count the question gives the asked entity's name (last mention wins)."""
    letter, words = None, None
    for sentence in re.split(r"(?<=[.?!])\s+", question):
        if not any_kind and (not kind or kind not in sentence.lower()):
            continue
        m = re.search(r"begins with “(\w)”", sentence)
        if m:
            letter = m.group(1)
        m = re.search(r"\b(single|one|two|three|four|five|six)[- ]word name|"
                      r"name is (?:a )?(single|one|two|three|four|five|six)(?: words? long| word)", sentence)
        if m:
            words = _NUMBERS[m.group(1) or m.group(2)]
    return letter, words


_TEMPLATE_WORDS = frozenset("there is are was were a an the this that these article articles about on mentions "
                            "mention name names begins begin with whose which who one single word words long "
                            "two three four five six records record event gives figure of another first second "
                            "third it its and in".split())


def content_query(clause: str) -> str:
    """A clause without the question's framing words ("There is", "whose name begins with")."""
    text = re.sub(r"“\w”", " ", clause)
    return " ".join(w for w in re.findall(r"[\w,'-]+", text) if w.lower().strip(",") not in _TEMPLATE_WORDS
                    and not re.fullmatch(r"\w+-word", w.lower()))


def _per_query(obs: str) -> dict[str, list[Any]]:
    """Hits of a search response by query."""
    out = {}
    for block in re.split(r"(?=A search for ')", obs):
        m = re.match(r"A search for '(.*?)' found", block)
        if m:
            out[m.group(1)] = parse_search_results(block)
    return out


def _fits(title: str, letter: str | None, words: int | None) -> bool:
    name = re.sub(r"\s*\([^)]*\)$", "", title)
    return (letter is None or name[:1].upper() == letter.upper()) and (words is None or len(name.split()) == words)


@dataclass
class ClauseAgent:
    """Search each clause, read the top hits, search from every page read for the asked kind of entity,
    keep the candidates that fit the name clues, and answer the one the most clues support."""

    reads: int = 5
    """Pages read per visit call (the visit tool's limit)."""
    name: str = "clause-agent"
    _question: str = field(default="", init=False)
    _kind: str = field(default="", init=False)
    _phase: int = field(default=0, init=False)
    _scores: Counter = field(default_factory=Counter, init=False)
    _urls: dict[str, str] = field(default_factory=dict, init=False)
    _read: dict[str, str] = field(default_factory=dict, init=False)
    _snippets: dict[str, str] = field(default_factory=dict, init=False)
    _name: tuple[str | None, int | None] = field(default=(None, None), init=False)
    _sentences: dict[str, tuple[str | None, int | None]] = field(default_factory=dict, init=False)

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self._question = question_of(obs)
        self._kind = asked_kind(self._question)
        self._name = name_constraints(self._question, self._kind)
        self._phase, self._scores, self._urls, self._read, self._snippets = 0, Counter(), {}, {}, {}

    def _hits(self, obs: str, weight: float) -> None:
        for hit in parse_search_results(obs):
            self._urls.setdefault(hit.title, hit.url)
            self._snippets.setdefault(hit.title, hit.snippet)
            self._scores[hit.title] += weight / hit.rank

    def _is_kind(self, title: str) -> bool:
        text = self._read.get(title) or self._snippets.get(title, "")
        return bool(self._kind) and self._kind in text.lower()[:300]

    def _store(self, obs: str) -> None:
        by_url = {u: t for t, u in self._urls.items()}
        for url, text in parse_visit_pages(obs).items():
            self._read[by_url.get(url, url)] = text

    def act(self, obs: str, info: dict[str, Any]) -> str:
        self._phase += 1
        if info.get("final_turn"):
            return self._answer()
        if self._phase == 1:
            self._sentences = {}
            for sentence in re.split(r"(?<=[.?!])\s+", self._question)[:-1]:
                q = content_query(sentence)
                if q:
                    self._sentences.setdefault(q, sentence_constraints(sentence))
            queries = list(self._sentences)[:10] or [self._question]
            return format_turn("Search every clue separately.", tool_call=("search", {"query": queries}))
        if self._phase == 2:
            self._hits(obs, 1.0)
            for query, hits in _per_query(obs).items():  # a hit that fits its sentence's name clues
                letter, words = self._sentences.get(query, (None, None))
                if letter or words:
                    for hit in hits:
                        if _fits(hit.title, letter, words):
                            self._scores[hit.title] += 3.0
            top = [t for t, _ in self._scores.most_common(self.reads)]
            if not top:
                return self._answer()
            return format_turn("Read the pages the clues point to.",
                               tool_call=("visit", {"url": [self._urls[t] for t in top], "goal": self._question}))
        if self._phase == 3:
            self._store(obs)
            queries = [f"{t} {self._kind}".strip() for t in list(self._read)[:self.reads]]
            return format_turn(f"Look for the {self._kind or 'entity'} related to each page read.",
                               tool_call=("search", {"query": queries}))
        if self._phase == 4:
            self._hits(obs, 0.5)
            self._rescore()
            order = sorted(self._scores, key=lambda t: (_fits(t, *self._name), self._is_kind(t), self._support(t),
                                                       self._scores[t]), reverse=True)
            top = [t for t in order if t not in self._read][:self.reads]
            if not top:
                return self._answer()
            return format_turn("Check the candidates that fit the clues.",
                               tool_call=("visit", {"url": [self._urls[t] for t in top], "goal": self._question}))
        self._store(obs)
        for title in self._read:
            self._scores[title] += 1.0 if self._is_kind(title) else -1.0
        return self._answer()

    def _names_in_reads(self) -> None:
        """Names the pages read show that fit the asked entity's name clues (candidates no search listed)."""
        if self._name == (None, None):
            return
        from wiki_sim.records import title_to_url

        for title, text in self._read.items():
            for m in _NAME.finditer(text):
                name = m.group(0)
                if name != title and _fits(name, *self._name):
                    self._urls.setdefault(name, title_to_url(name))
                    self._scores[name] += 1.5

    def _rescore(self) -> None:
        """The intersection: named by a page read, of the asked kind, fitting the name clues."""
        self._names_in_reads()
        for title in list(self._scores):
            named = sum(title.lower() in text.lower() for t, text in self._read.items() if t != title)
            fits = _fits(title, *self._name)
            self._scores[title] += named + (2.0 if self._is_kind(title) else 0.0) + (3.0 if fits else -10.0)

    def _support(self, title: str) -> int:
        """Pages read (other than ``title``) that name it, plus those its own text names."""
        low = title.lower()
        own = self._read.get(title, "").lower()
        named_by = sum(low in text.lower() for t, text in self._read.items() if t != title)
        names = sum(t.lower() in own for t in self._read if t != title) if own else 0
        return named_by + names

    def _answer(self) -> str:
        q = _terms(self._question)
        ranked = []
        for title, score in self._scores.items():
            if _terms(title) and _terms(title) <= q:  # a page the question names is not its answer
                continue
            ranked.append(((_fits(title, *self._name), self._is_kind(title), self._support(title), score), title))
        if not ranked:
            return format_turn("Nothing found.", answer="unknown")
        best = max(ranked)[1]
        return format_turn(f"{best} fits the most clues.", answer=re.sub(r"\s*\([^)]*\)$", "", best))
