"""How the graph builder explores: the agent's own search and visit, on the simulator or through tools.

:class:`Explorer` is what :func:`sailorfog.graph.build_graph` needs: ``search`` (queries ->
hits) and ``read`` (a URL -> the page's text, its links to other entities, its facts).
Two implementations:

- :class:`SimExplorer` over a :class:`wiki_sim.WikiSim`: search is the search tool's
  backend (``WikiSim.search``); a read is the page the visit tool would open, whole (no
  goal-focused summary), with its links and infobox facts structured from the store (fast;
  the default);
- :class:`ToolExplorer` over any ``search`` and ``visit`` tool objects (``envs.tools``
  protocol: the simulator's :class:`envs.tools.search.SearchTool`/``VisitTool`` or the live
  layer's ``LiveSearchTool``/``LiveVisitTool``): it sees only what an agent sees, the tools'
  text. Related entities are linked by search: capitalized names in the visited text are
  searched for and kept when a hit's title is that name (the query becomes provenance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from wiki_sim.records import PageInfo, canonical_title, title_to_url, url_to_title
from wiki_sim.sentences import sentence_spans

SEARCH_SEPARATOR = "\n=======\n"
_HIT_LINE = re.compile(r"^\d{1,3}\. \[(?P<title>[^\n]{0,500})\]\((?P<url>[^\s)]{1,2000})\)$")
# Capitalized names: up to 6 capitalized words, joined by spaces or short connectors.
_NAME = re.compile(r"\b[A-Z][\w'’-]{1,40}(?:(?: (?:of|the|de|von|van|da|la|and|for|du|del|in|on)){0,2} "
                   r"[A-Z][\w'’-]{0,40}){0,5}")
_QUALIFIER = re.compile(r"\s*\([^()]*\)$")
_STOP_NAMES = frozenset("The A An In On It He She They This That These Those His Her Its Their There When While "
                        "After Before During From Since Although However As At By For With Of And But Or If "
                        "Evidence Summary".split())


@dataclass(frozen=True)
class Found:
    """One search hit."""

    title: str
    url: str
    snippet: str = ""


@dataclass(frozen=True)
class LinkRead:
    """A related entity seen on a page: a link (or a name the search linked to a page)."""

    target: str
    """Canonical page title of the entity."""
    anchor: str
    sentence: str
    """The sentence of the page that names it ("" when unknown)."""
    query: str = ""
    """The search query that found the entity's page, when the link came from a search."""
    url: str = ""
    """The entity page's URL when it is not the Wikipedia URL of ``target`` (live web)."""


@dataclass
class PageRead:
    """What reading one page gave the builder."""

    title: str
    url: str
    text: str
    """The page text the builder extracts dates and numbers from (whole page, or the visit tool's output)."""
    links: list[LinkRead] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    """``{key, value, target, sentence}``."""


@runtime_checkable
class Explorer(Protocol):
    """The two tools the builder explores with, plus corpus statistics where known."""

    def search(self, queries: list[str]) -> list[list[Found]]:
        """Top hits for each query."""
        ...

    def read(self, url: str, goal: str) -> PageRead | None:
        """The page at ``url`` read for ``goal``; ``None`` when there is none."""
        ...

    def page_stats(self) -> dict[str, PageInfo]:
        """Title -> (url, length, inbound links) for the whole corpus; ``{}`` when unknown (live web)."""
        ...


def _is_wikipedia(url: str) -> bool:
    return url_to_title(url) is not None and "://" in url and "wikipedia.org/" in url


def display_name(title: str) -> str:
    """``'Mercury (planet)'`` -> ``'Mercury'``."""
    return _QUALIFIER.sub("", title).strip() or title


def name_query(title: str) -> str:
    """The search query the builder uses to find an entity's page: its title without brackets."""
    return " ".join(title.replace("(", " ").replace(")", " ").split())


def _sentence_at(text: str, spans: list[tuple[int, int]], pos: int) -> str:
    for s, e in spans:
        if s <= pos < e:
            return text[s:e].strip()
    return ""


def _fact_sentence(text: str, spans: list[tuple[int, int]], value: str) -> str:
    if len(value) < 3:
        return ""
    pos = text.find(value)
    return _sentence_at(text, spans, pos) if pos >= 0 else ""


class SimExplorer:
    """Explore a :class:`wiki_sim.WikiSim` through its search and visit backends."""

    structured_links = True
    """Pages come with all their links (no need to look for names of other nodes in the text)."""

    def __init__(self, sim: Any, k: int = 10, max_text_chars: int = 20_000):
        self.sim, self.k, self.max_text_chars = sim, k, max_text_chars
        self._stats: dict[str, PageInfo] | None = None

    def search(self, queries: list[str]) -> list[list[Found]]:
        return [[Found(h.title, h.url, h.snippet) for h in hits] for hits in self.sim.search(queries, k=self.k)]

    def read(self, url: str, goal: str) -> PageRead | None:
        title = url_to_title(url)
        page = self.sim.page(title) if title else None
        if page is None:
            return None
        text = page["text"][: self.max_text_chars]
        spans = sentence_spans(text)
        links = [LinkRead(x.target, x.anchor, x.sentence) for x in self.sim.page_links(page["title"])
                 if x.target != page["title"]]
        facts = [{"key": f["key"], "value": f["value"], "target": f["target"],
                  "sentence": _fact_sentence(text, spans, f["value"])} for f in self.sim.facts(page["title"])]
        return PageRead(page["title"], page["url"], text, links, facts)

    def page_stats(self) -> dict[str, PageInfo]:
        if self._stats is None:
            self._stats = {p.title: p for p in self.sim.iter_pages()}
        return self._stats


def parse_search_output(text: str) -> list[list[Found]]:
    """The hits of each query in a search tool's output (``envs.formatting.format_search_batch``)."""
    results = []
    for block in text.split(SEARCH_SEPARATOR):
        hits: list[Found] = []
        title = url = ""
        snippet: list[str] = []
        for line in block.split("\n"):
            m = _HIT_LINE.match(line)
            if m:
                if url:
                    hits.append(Found(title, url, " ".join(snippet).strip()))
                title, url, snippet = m["title"], m["url"], []
            elif url and line.strip() and not line.startswith("Date published:"):
                snippet.append(line.strip())
        if url:
            hits.append(Found(title, url, " ".join(snippet).strip()))
        results.append(hits)
    return results


def parse_visit_output(text: str) -> str | None:
    """Evidence and summary of a visit tool's output for one page; ``None`` for a page not found."""
    if "could not be extracted" in text[:2000] and "Evidence in page" not in text:
        return None
    body = text.split("Evidence in page:", 1)[-1]
    evidence, _, summary = body.partition("Summary:")
    return (evidence.strip() + "\n" + summary.strip()).strip()


class ToolExplorer:
    """Explore through ``search``/``visit`` tool objects, seeing only their text (as an agent does).

    ``max_names``: capitalized names per page that are searched for to find related
    entities. ``stats``: corpus statistics if the caller has them (a simulator's
    ``iter_pages``); without them features report ``-1`` inbound links and seeds must be given.
    """

    structured_links = False
    """Only names the search linked are known; the builder also looks for other nodes' names in the text."""

    def __init__(self, search_tool: Any, visit_tool: Any, *, max_names: int = 10, max_text_chars: int = 20_000,
                 stats: dict[str, PageInfo] | None = None, queries_per_call: int = 10):
        self.search_tool, self.visit_tool = search_tool, visit_tool
        self.max_names, self.max_text_chars = max_names, max_text_chars
        self.queries_per_call = queries_per_call
        self._stats = stats or {}
        self._titles: dict[str, str] = {}
        """URL -> title, from search hits (a non-Wikipedia page's title is known only from them)."""

    def title_of(self, url: str, fallback: str = "") -> str | None:
        """A page's node title: the Wikipedia title its URL names, else the title a search gave it."""
        return url_to_title(url) if _is_wikipedia(url) else self._titles.get(url) or fallback or None

    def search(self, queries: list[str]) -> list[list[Found]]:
        out: list[list[Found]] = []
        for i in range(0, len(queries), self.queries_per_call):
            batch = queries[i:i + self.queries_per_call]
            result = self.search_tool({"query": batch})
            parsed = parse_search_output(result.text) if result.ok else []
            for hits in parsed:
                for hit in hits:
                    if not _is_wikipedia(hit.url):
                        self._titles.setdefault(hit.url, canonical_title(hit.title) or hit.url)
            out.extend(parsed[:len(batch)] + [[] for _ in range(len(batch) - len(parsed))])
        return out

    def read(self, url: str, goal: str) -> PageRead | None:
        result = self.visit_tool({"url": [url], "goal": goal})
        text = parse_visit_output(result.text) if result.ok else None
        title = self.title_of(url, fallback=url)  # a page no search has shown is known by its URL
        if not text or not title:
            return None
        text = text[: self.max_text_chars]
        return PageRead(title, title_to_url(title) if _is_wikipedia(url) else url, text,
                        self._link_names(title, text), [])

    def _link_names(self, title: str, text: str) -> list[LinkRead]:
        """Entities named in ``text``: each candidate name searched, kept if a hit is that page."""
        names: dict[str, int] = {}
        own = {title.casefold(), display_name(title).casefold()}
        for m in _NAME.finditer(text):
            name = m.group(0).rstrip("'’-")
            if name in _STOP_NAMES or len(name) < 3 or name.casefold() in own or name in names:
                continue
            names[name] = m.start()
            if len(names) >= self.max_names:
                break
        spans = sentence_spans(text)
        links = []
        for (name, pos), hits in zip(names.items(), self.search(list(names))):
            for hit in hits:
                hit_title = self.title_of(hit.url, canonical_title(hit.title))
                if hit_title and hit_title != title and name.casefold() in (
                        hit_title.casefold(), display_name(hit_title).casefold()):
                    links.append(LinkRead(hit_title, name, _sentence_at(text, spans, pos), query=name,
                                          url="" if _is_wikipedia(hit.url) else hit.url))
                    break
        return links

    def page_stats(self) -> dict[str, PageInfo]:
        return self._stats
