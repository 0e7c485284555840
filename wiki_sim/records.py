"""The records every ingestion source produces, and the title/URL conventions.

Sources (XML dump, JSONL corpora, the embedded default) yield :class:`Page` and
:class:`Redirect` records; the store writer consumes them. Titles are normalized the way
MediaWiki does it (underscores are spaces, whitespace collapsed, first letter upper case),
and every page's URL is its real English Wikipedia URL, so a policy trained on the
simulator sees the URLs it will see on the live web.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit, parse_qs

WIKI_URL_PREFIX = "https://en.wikipedia.org/wiki/"
_WS = re.compile(r"[\s_]+")
# Characters MediaWiki leaves unescaped in article paths.
_URL_SAFE = "!$'()*,-./:;@_~"


@dataclass
class Page:
    """One article, cleaned to text.

    ``text`` is the whole article as plain text; section headings stand on their own line
    as markdown headings (``## History``, ``### Early life``) so passages keep their context.
    ``lead`` is the text before the first heading.
    """

    title: str
    text: str
    lead: str = ""
    sections: list[str] = field(default_factory=list)
    """Section headings, in order."""
    links: list[tuple[str, str]] = field(default_factory=list)
    """(normalized target title, anchor text) for each wikilink, in order."""
    facts: list[tuple[str, str, str]] = field(default_factory=list)
    """(key, value, source): infobox fields (source ``infobox:<template>``), short description, ..."""
    hidden_links: set[int] = field(default_factory=set)
    """Indexes into ``links`` of links not shown in ``text`` (infobox values, hatnotes): they
    have no sentence."""
    fact_targets: dict[int, str] = field(default_factory=dict)
    """Index into ``facts`` -> the title of the first page its value links to (``birth_place``
    ``[[Ulm]], [[German Empire]]`` -> ``Ulm``); facts whose value holds no link are absent."""
    url: str = ""
    """The document's own URL (a JSONL corpus of web pages); "" for the page's Wikipedia URL."""
    link_starts: list[int] = field(default_factory=list)
    """Offset in ``text`` of each link's anchor, when known (derived links); empty: the
    store finds each anchor in reading order."""
    aliases: list[tuple[str, str]] = field(default_factory=list)
    """(other name, where it comes from): ``title`` (the title without its disambiguator),
    ``lead`` (the defining sentence: "also known as", "or", a parenthesised native name),
    ``bold`` (bold names of a dump's lead). Redirects are separate records."""


@dataclass(frozen=True)
class PageInfo:
    """One page of a built simulator, for bulk iteration (:meth:`wiki_sim.WikiSim.iter_pages`)."""

    title: str
    url: str
    length: int
    """Characters of the page's text."""
    inbound_links: int
    """Distinct other pages of the store with a link into this one."""


@dataclass(frozen=True)
class LinkInfo:
    """One link between pages (:meth:`wiki_sim.WikiSim.iter_links`, ``dangling_links``)."""

    source: str
    target: str
    """The canonical title of the linked page (redirects followed); for a dangling link,
    the normalized title it names, which is not a page of the store."""
    anchor: str
    sentence: str
    """The sentence of ``source``'s text that shows the link ("" when unknown, e.g. a link
    in an infobox)."""


@dataclass
class Redirect:
    """A redirect page: ``title`` is an alias of ``target``."""

    title: str
    target: str


def canonical_title(title: str) -> str:
    """A page's title as stored: ``'foo_bar  baz'`` -> ``'Foo bar baz'`` (underscores and runs of
    white space are one space, the first letter upper case). Every other character is kept, so
    ``C``, ``C#`` and ``C++`` stay three titles."""
    title = _WS.sub(" ", title).strip()
    if title[:1].islower():
        title = title[0].upper() + title[1:]
    return title


def normalize_title(title: str) -> str:
    """The page a wiki link target names: ``'foo_bar  baz#Sec'`` -> ``'Foo bar baz'`` (the
    ``#section`` dropped, then :func:`canonical_title`). For link targets, not page titles."""
    return canonical_title(title.split("#", 1)[0])


def title_to_url(title: str) -> str:
    """``'Albert Einstein'`` -> ``'https://en.wikipedia.org/wiki/Albert_Einstein'`` (``C#`` -> ``.../C%23``)."""
    return WIKI_URL_PREFIX + quote(canonical_title(title).replace(" ", "_"), safe=_URL_SAFE)


def url_to_title(url: str) -> str | None:
    """The page title a Wikipedia URL names, or ``None`` if it names none.

    Accepts ``https://en.wikipedia.org/wiki/T``, the mobile host, ``http``, a bare
    ``en.wikipedia.org/wiki/T``, ``/w/index.php?title=T``, a percent-encoded title, and a
    fragment or query string after it. A bare title (no scheme, no host) is also accepted.
    """
    url = url.strip()
    if not url:
        return None
    if "://" not in url and not url.startswith(("en.wikipedia.org", "en.m.wikipedia.org", "/wiki/", "/w/")):
        return canonical_title(unquote(url)) or None
    if "://" not in url:
        url = "https://" + url.lstrip("/") if not url.startswith("/") else "https://en.wikipedia.org" + url
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
    except ValueError:  # a malformed port or IPv6 literal
        return None
    if (parts.netloc and not host) or (host and host != "wikipedia.org" and not host.endswith(".wikipedia.org")):
        return None
    if parts.path.startswith("/wiki/"):
        raw = parts.path[len("/wiki/"):]
    elif parts.path.startswith("/w/index.php"):
        raw = parse_qs(parts.query).get("title", [""])[0]
    else:
        return None
    title = canonical_title(unquote(raw))  # the fragment is already split off: a %23 is part of the title
    return title or None
