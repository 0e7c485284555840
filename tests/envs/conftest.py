"""Fixtures for the environment tests: small in-memory tools implementing the Tool protocol.

``MiniWiki`` answers the simulator's ``search``/``visit`` contract over a handful of
pages held in memory (ranking by shared words, reading with ``wiki_sim.focus``), so the
environment's logic is tested fast and without a built simulator; the tests against the
real simulator use the ``gensim_wiki``/``default_wiki`` fixtures of tests/conftest.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from envs.tools.base import ToolResult
from wiki_sim.focus import ExtractiveSummarizer, format_not_found, format_visit, tokenize
from wiki_sim.records import title_to_url, url_to_title

PAGES = {
    "Santa Claus (horse)": (
        "Santa Claus (1961-1970) was a British-bred, Irish-trained Thoroughbred racehorse and sire. "
        "He won the Irish 2,000 Guineas, the Epsom Derby and the Irish Derby in 1964."),
    "Epsom Derby": (
        "The Derby Stakes, also called the Epsom Derby, is a Group 1 flat horse race in England open to "
        "three-year-old colts and fillies, run at Epsom Downs in June."),
    "Helioseismic and Magnetic Imager": (
        "The Helioseismic and Magnetic Imager is an instrument aboard the Solar Dynamics Observatory, "
        "led by Stanford University, that studies solar oscillations and the magnetic field of the Sun."),
    "Solar Dynamics Observatory": (
        "The Solar Dynamics Observatory is a NASA mission observing the Sun since 2010, carrying three "
        "instruments including the Helioseismic and Magnetic Imager."),
    "Bloom's taxonomy": (
        "Bloom's taxonomy is a set of three hierarchical models used to classify educational learning "
        "objectives, revised in 2001."),
    "Paris": "Paris is the capital and most populous city of France, on the Seine.",
}

TASKS = [
    {"id": "horse", "question": "Which racehorse, named after a Christmas gift-giver, won the Epsom Derby in 1964?",
     "answer": "Santa Claus", "aliases": ["Santa Claus (horse)"]},
    {"id": "sdo", "question": "Which instrument aboard the Solar Dynamics Observatory studies solar oscillations?",
     "answer": "Helioseismic and Magnetic Imager"},
    {"id": "capital", "question": "What is the capital and most populous city of France?", "answer": "Paris"},
]


@dataclass
class Hit:
    title: str
    url: str
    snippet: str


class MiniWiki:
    """The simulator contract (``search``, ``visit``) over :data:`PAGES`."""

    def __init__(self, pages: dict[str, str] = PAGES):
        self.pages = pages
        self.summarizer = ExtractiveSummarizer()

    def search(self, queries: list[str], k: int = 10) -> list[list[Hit]]:
        results = []
        for query in queries:
            terms = set(tokenize(query))
            scored = [(len(terms & set(tokenize(f"{t} {x}"))), t) for t, x in self.pages.items()]
            ranked = [t for s, t in sorted(scored, key=lambda p: (-p[0], p[1])) if s > 0][:k]
            results.append([Hit(t, title_to_url(t), self.pages[t][:150]) for t in ranked])
        return results

    def visit(self, url: str, goal: str) -> str:
        title = url_to_title(url)
        if title not in self.pages:
            return format_not_found(url)
        text = self.pages[title]
        return format_visit(url, goal, self.summarizer(url=url, title=title, text=text, lead=text, goal=goal))


class EchoTool:
    name = "echo"
    description = "Returns its text argument."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        text = arguments.get("text")
        if not isinstance(text, str):
            return ToolResult('Error: echo needs "text", a string.', ok=False)
        return ToolResult(text, metadata={"chars": len(text)})


class RaisingTool:
    name = "broken"
    description = "Always raises."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        raise RuntimeError("disk on fire")


@pytest.fixture
def mini_wiki() -> MiniWiki:
    return MiniWiki()


@pytest.fixture
def mini_tools(mini_wiki):
    from envs.tools.search import SearchTool
    from envs.tools.visit import VisitTool

    return [SearchTool(mini_wiki), VisitTool(mini_wiki), EchoTool(), RaisingTool()]


@pytest.fixture
def make_env(mini_tools):
    from envs.env import ResearchEnv

    def make(**kwargs):
        kwargs.setdefault("current_date", "2025-07-18")
        return ResearchEnv(kwargs.pop("tools", mini_tools), kwargs.pop("tasks", TASKS), **kwargs)

    return make
