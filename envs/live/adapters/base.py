"""What adapters return."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Hit:
    """One search result, in the fields :func:`envs.formatting.format_search` reads."""

    title: str
    url: str
    snippet: str = ""
    date: str = ""


@dataclass
class PageText:
    """A page read as text; headings as markdown ``#`` lines where the reader keeps them."""

    url: str
    title: str
    text: str
    lead: str = ""


@dataclass
class Reply(Generic[T]):
    """An adapter's value, and whether the cache supplied it (no request was sent)."""

    value: T
    cache_hit: bool = False


def strip_html(text: str) -> str:
    """Text of a snippet that carries markup (``<span class="searchmatch">``, entities)."""
    return " ".join(html.unescape(_TAG.sub("", text or "")).split())


def from_cache(response) -> bool:
    """Whether requests-cache answered ``response`` from the database."""
    return bool(getattr(response, "from_cache", False))
