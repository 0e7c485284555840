"""Baseline agents (scripted): the floor every trained agent must beat, and a sanity check.

Both read only the observations (as a model would): the question from the first prompt,
search results and page evidence from the tool responses.

- :class:`RandomAgent` picks among a random search, a random visit of a URL it has
  seen, an answer with a random title it has seen, and a malformed turn.
- :class:`HeuristicAgent` searches the question's salient words, visits the best hits,
  and answers with the candidate title the evidence supports most.

:func:`envs.episode.run_episode` plays an episode with either.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.episode import Agent
from envs.protocol import format_turn
from envs.prompts import parse_chatml
from wiki_sim.focus import STOPWORDS, tokenize

_HIT = re.compile(r"^(?P<rank>\d+)\. \[(?P<title>.*)\]\((?P<url>[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)\s*$", re.MULTILINE)
_VISIT_HEAD = re.compile(r"The useful information in (\S+) for user goal")
_TOOLS = re.compile(r"<tools>\n(.*?)\n</tools>", re.DOTALL)
# Double quotes, curly quotes, or single quotes that are not apostrophes (not inside a word).
_QUOTED = re.compile(r"\"([^\"]{3,300})\"|“([^”]{3,300})”|(?<!\w)['‘]([^'’]{3,200})['’](?!\w)")
_BLANK = re.compile(r"_{2,}")
# Words about the question's form, not its subject ("Answer with the article's title").
META_WORDS = frozenset("answer answers article articles title titles wikipedia question name named called known "
                       "described description".split())
# One blank run between words (two adjacent optional runs backtrack quadratically on long blanks).
_CAPITALIZED = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:(?:of|the|de|von|van|and)\s+|&\s*)?[A-Z][\w'’.-]*)+")


def question_of(prompt: str) -> str:
    """The question in a first prompt (the last user message of the ChatML text)."""
    users = [m["content"] for m in parse_chatml(prompt) if m["role"] == "user"]
    return users[-1] if users else prompt


def tool_names_of(prompt: str) -> list[str]:
    """Names of the tools the system prompt lists."""
    match = _TOOLS.search(prompt)
    names = []
    for line in (match.group(1).splitlines() if match else []):
        try:
            spec = json.loads(line)
        except json.JSONDecodeError:
            continue
        fn = spec.get("function", spec) if isinstance(spec, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str
    rank: int


def parse_search_results(text: str) -> list[SearchHit]:
    """Every hit in a search tool response (all queries), in order."""
    hits = []
    matches = list(_HIT.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[m.end():end].split("\n=======\n", 1)[0]
        snippet = "\n".join(line for line in body.strip().splitlines() if not line.startswith("Date published:"))
        rank = int(m.group("rank"))
        hits.append(SearchHit(m.group("title").strip(), m.group("url").strip(), snippet.strip(), rank))
    return hits


def parse_visit_pages(text: str) -> dict[str, str]:
    """URL -> page text (evidence and summary) of a visit tool response, without the echoed goal."""
    pages: dict[str, str] = {}
    heads = list(_VISIT_HEAD.finditer(text))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end():end]
        for marker in ("Evidence in page:", "as follows:", "could not be extracted:"):
            if marker in body:
                body = body.split(marker, 1)[1]
                break
        pages[m.group(1)] = body.strip()
    return pages


def quoted_phrases(question: str, keep_blanks: bool = False) -> list[str]:
    """Phrases quoted in the question, with blanks (``___``) removed unless ``keep_blanks``."""
    phrases = []
    for groups in _QUOTED.findall(question):
        phrase = next(g for g in groups if g)
        phrase = " ".join((phrase if keep_blanks else _BLANK.sub(" ", phrase)).split())
        if len(phrase) >= 3:
            phrases.append(phrase)
    return phrases


def quote_support(question: str, page_text: str) -> float:
    """Fraction of the question's quoted pieces (split at blanks) found word for word in the page."""
    words = " " + " ".join(tokenize(page_text)) + " "
    pieces = [" ".join(tokenize(piece)) for phrase in quoted_phrases(question, keep_blanks=True)
              for piece in _BLANK.split(phrase)]
    pieces = [p for p in pieces if p.count(" ") >= 1]  # two words or more
    return sum(f" {p} " in words for p in pieces) / len(pieces) if pieces else 0.0


def _terms(text: str) -> set[str]:
    """Content words, cut to 5 characters so that inflections meet (engineer/engineering)."""
    return {t[:5] for t in tokenize(text) if t not in META_WORDS and t != "_"}


def salient_queries(question: str, max_queries: int = 3, max_words: int = 10) -> list[str]:
    """Search queries from a question: quoted phrases, capitalized names, its content words."""
    queries: list[str] = quoted_phrases(question)[: max_queries - 1]
    words = [w for w in re.findall(r"[\w'’-]+", _BLANK.sub(" ", question))
             if w.lower() not in STOPWORDS and w.lower() not in META_WORDS and len(w) > 1]
    content = " ".join(sorted(dict.fromkeys(words), key=lambda w: (-w[0].isupper(), -len(w)))[:max_words])
    if content and content not in queries:
        queries.append(content)
    for name in _CAPITALIZED.findall(question):
        if len(queries) >= max_queries:
            break
        if name not in queries and name.split()[0].lower() not in STOPWORDS | META_WORDS:
            queries.append(name)
    return queries[:max_queries] or [question[:200]]


@dataclass
class HeuristicAgent:
    """Scripted agent: search the salient words, visit the best hits, answer the best-supported title."""

    visits: int = 5
    """How many of the best hits to read."""
    max_queries: int = 3
    """How many search queries to write (a search tool that reads fewer ignores the rest)."""
    name: str = "heuristic"
    _question: str = field(default="", init=False)
    _phase: str = field(default="search", init=False)
    _hits: list[SearchHit] = field(default_factory=list, init=False)
    _tools: list[str] = field(default_factory=list, init=False)

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self._question = question_of(obs)
        self._tools = tool_names_of(obs)
        self._phase = "search"
        self._hits = []

    def act(self, obs: str, info: dict[str, Any]) -> str:
        if info.get("final_turn") or "search" not in self._tools:
            return self._answer({})
        if self._phase == "search":
            self._phase = "visit"
            queries = salient_queries(self._question, max_queries=self.max_queries)
            return format_turn(f"Search for the salient words: {queries}",
                               tool_call=("search", {"query": queries}))
        if self._phase == "visit":
            self._hits = parse_search_results(obs)
            urls = list(dict.fromkeys(h.url for h in self._ranked_hits()))[:self.visits]
            if not urls or "visit" not in self._tools:
                return self._answer({})
            self._phase = "answer"
            return format_turn(f"Read the best hits: {urls}", tool_call=("visit", {"url": urls, "goal": self._question}))
        return self._answer(parse_visit_pages(obs))

    def _ranked_hits(self) -> list[SearchHit]:
        scores = self._search_scores()
        best: dict[str, SearchHit] = {}
        for hit in self._hits:
            best.setdefault(hit.title, hit)
        return sorted(best.values(), key=lambda h: -scores.get(h.title, 0.0))

    def _search_scores(self) -> dict[str, float]:
        q_terms = _terms(self._question)
        scores: Counter[str] = Counter()
        for hit in self._hits:
            overlap = len(q_terms & _terms(f"{hit.title} {hit.snippet}")) / (len(q_terms) or 1)
            scores[hit.title] += 1.0 / hit.rank + overlap
        for title in scores:
            scores[title] -= 2.0 * _named_in_question(title, self._question)
        return dict(scores)

    def _answer(self, pages: dict[str, str]) -> str:
        scores = self._search_scores()
        q_terms = _terms(self._question)
        url_title = {h.url: h.title for h in self._hits}
        for url, text in pages.items():
            title = url_title.get(url)
            if title is not None:
                support = len(q_terms & _terms(text)) / (len(q_terms) or 1)
                # The page says, word for word, what the question quotes.
                quoted = quote_support(self._question, text)
                scores[title] = scores.get(title, 0.0) + 2.0 * support + 3.0 * quoted
        if not scores:
            return format_turn("Nothing found; a guess.", answer="unknown")
        best = max(scores, key=lambda t: (scores[t], t))
        return format_turn(f"The best-supported candidate is {best}.", answer=_display_title(best))


def _named_in_question(title: str, question: str) -> float:
    """1 if every word of the title (without a parenthetical) appears in the question."""
    words = _terms(_display_title(title))
    return float(bool(words) and words <= _terms(question))


def _display_title(title: str) -> str:
    return re.sub(r"\s*\([^)]*\)$", "", title).strip() or title


@dataclass
class RandomAgent:
    """Uniformly random among search, visit, answer and a malformed turn (seeded)."""

    seed: int | None = None
    name: str = "random"
    _rng: np.random.Generator = field(init=False, repr=False)
    _words: list[str] = field(default_factory=list, init=False)
    _hits: list[SearchHit] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self._words = tokenize(question_of(obs)) or ["wikipedia"]
        self._hits = []

    def act(self, obs: str, info: dict[str, Any]) -> str:
        self._hits.extend(parse_search_results(obs))
        choice = int(self._rng.integers(4))
        if choice == 0 or (choice == 1 and not self._hits):
            n = int(self._rng.integers(1, 4))
            query = " ".join(self._rng.choice(self._words, size=min(n, len(self._words)), replace=False))
            return format_turn("Random search.", tool_call=("search", {"query": [query]}))
        if choice == 1:
            hit = self._hits[int(self._rng.integers(len(self._hits)))]
            return format_turn("Random visit.", tool_call=("visit", {"url": [hit.url], "goal": "anything"}))
        if choice == 2:
            titles = [h.title for h in self._hits] or self._words
            return format_turn("Random answer.", answer=_display_title(titles[int(self._rng.integers(len(titles)))]))
        return "I am not sure what to do."


AGENTS = {"heuristic": HeuristicAgent, "random": RandomAgent}


def make_agent(name: str, seed: int | None = None) -> Agent:
    """A scripted agent by name (played by :func:`envs.episode.run_episode`)."""
    if name == "heuristic":
        return HeuristicAgent()
    if name == "random":
        return RandomAgent(seed=seed)
    raise ValueError(f"policy must be one of {sorted(AGENTS)}, got {name!r}")

