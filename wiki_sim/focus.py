"""Goal-focused reading of a page: the visit tool's content, without a model by default.

A page's text is cut into passages (paragraphs, long ones split at sentence ends, each
carrying its section heading). Passages are ranked by BM25 against the goal; the best
ones, up to a character budget, are returned in page order as the evidence, with the
lead as the summary. A :class:`Summarizer` may replace this (for example a language model
behind an OpenAI-compatible endpoint); the live-web environment falls back to
:class:`ExtractiveSummarizer` when its model fails.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from wiki_sim.evidence import focus
from wiki_sim.sentences import NOT_AN_ABBREVIATION

_TOKEN = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])" + NOT_AN_ABBREVIATION + r"\s+(?=[A-Z0-9\"'(\[])")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were "
    "which with what who whom whose when where why how did does do i me my you your he she they "
    "them his her their our we us about into than then there these those also been being can "
    "could would should will shall may might must not no nor so such only other any all each "
    "some most more very just find information page user goal".split()
)


MAX_PAGE_CHARS = 1 << 21
"""Characters of a page that :func:`extract` reads (2 Mi; the longest Wikipedia articles
have under 1 Mi characters of text): a bound on a visit's work whatever the page."""
MAX_GOAL_CHARS = 4096
"""Characters of a goal that ranking reads."""
MAX_GOAL_TERMS = 256
"""Distinct goal words that ranking uses."""


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


@dataclass
class Passage:
    """A piece of a page: its text, the section it sits in, and its order on the page."""

    text: str
    section: str
    position: int


@dataclass
class Focused:
    """What the visit tool returns for one page: evidence passages and a summary."""

    evidence: str
    summary: str


def split_passages(text: str, max_chars: int = 700) -> list[Passage]:
    """Paragraphs of ``text`` (headings as ``## Title`` lines), long ones cut at sentence ends."""
    passages: list[Passage] = []
    section = ""
    for block in re.split(r"\n\s*\n|\n(?=#)", text):
        block = block.strip()
        if not block:
            continue
        lines = block.split("\n")
        heading = _HEADING.match(lines[0])
        if heading:
            section = heading.group(2).strip()
            block = "\n".join(lines[1:]).strip()
            if not block:
                continue
        chunk = ""
        for sentence in _SENTENCE_END.split(block):
            if chunk and len(chunk) + len(sentence) + 1 > max_chars:
                passages.append(Passage(chunk, section, len(passages)))
                chunk = ""
            chunk = f"{chunk} {sentence}".strip() if chunk else sentence
            if len(chunk) > max_chars * 2:  # a sentence with no ends (lists, tables): cut in pieces
                pieces = -(-(len(chunk) - max_chars * 2) // max_chars)  # leaves at most 2 * max_chars
                for j in range(pieces):  # slices of the whole chunk: linear (re-slicing it is quadratic)
                    passages.append(Passage(chunk[j * max_chars:(j + 1) * max_chars], section, len(passages)))
                chunk = chunk[pieces * max_chars:]
        if chunk:
            passages.append(Passage(chunk, section, len(passages)))
    return passages


def rank_passages(passages: list[Passage], goal: str, k1: float = 1.2, b: float = 0.75) -> list[float]:
    """BM25 score of each passage (its section heading counted in) for the goal's words.

    Linear in the page and the goal: document frequencies are counted in one pass, each
    passage visiting only the smaller of its terms and the goal's; the goal counts with its
    first :data:`MAX_GOAL_TERMS` distinct words.
    """
    query = set(list(dict.fromkeys(tokenize(goal[:MAX_GOAL_CHARS])))[:MAX_GOAL_TERMS])
    if not passages or not query:
        return [0.0] * len(passages)
    docs = [Counter(tokenize(f"{p.section} {p.text}")) for p in passages]
    lengths = [sum(d.values()) for d in docs]
    avg = sum(lengths) / len(docs) or 1.0
    n = len(docs)
    matches = [[t for t in doc if t in query] if len(doc) < len(query) else [t for t in query if t in doc]
               for doc in docs]
    df = Counter(t for terms in matches for t in terms)
    idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    scores = []
    for doc, length, terms in zip(docs, lengths, matches):
        norm = k1 * (1 - b + b * length / avg)
        scores.append(sum(idf[t] * doc[t] * (k1 + 1) / (doc[t] + norm) for t in terms))
    return scores


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def extract(text: str, goal: str, lead: str = "", budget: int = 3000, summary_chars: int = 600,
            title: str = "") -> Focused:
    """Evidence for ``goal`` (best passages first, with context, within ``budget`` characters)
    and a summary from the answer-bearing sentences (see :mod:`wiki_sim.evidence`)."""
    evidence, summary = focus(text, goal, title=title, lead=lead, budget=budget, summary_chars=summary_chars)
    return Focused(evidence=evidence, summary=summary)


@runtime_checkable
class Summarizer(Protocol):
    """Turns a page into goal-focused evidence and a summary (the paper's visit tool)."""

    def __call__(self, *, url: str, title: str, text: str, lead: str, goal: str) -> Focused: ...


@dataclass
class ExtractiveSummarizer:
    """The default: goal-ranked passages as evidence, the answer-bearing sentences as summary. No model."""

    budget: int = 3000
    """Characters of evidence per page."""
    summary_chars: int = 600
    """Characters of summary per page."""

    def __call__(self, *, url: str, title: str, text: str, lead: str, goal: str) -> Focused:
        return extract(text, goal, lead=lead, budget=self.budget, summary_chars=self.summary_chars, title=title)


def format_visit(url: str, goal: str, focused: Focused, summary: bool = True) -> str:
    """The visit tool's text for one page, as the reference agent's visit tool writes it (without the
    summary: header and evidence only, as the compact setting shows it)."""
    head = (f"The useful information in {url} for user goal {goal} as follows: \n\n"
            f"Evidence in page: \n{focused.evidence}")
    return f"{head}\n\nSummary: \n{focused.summary}\n\n" if summary else head


def format_not_found(url: str, goal: str = "", suggestions: Sequence[tuple[str, str]] = ()) -> str:
    """The visit tool's text for a URL the simulator (or the web) has no page for; ``suggestions``
    are ``(title, url)`` pairs of the closest pages ("did you mean")."""
    text = (f"The useful information in {url} for user goal {goal} could not be extracted: page not found. "
            "Check the URL (copy it exactly from a search result) or search for the page first.")
    if suggestions:
        text += " Did you mean: " + "; ".join(f"{title} ({link})" for title, link in suggestions) + "?"
    return text + "\n\n"
