"""MediaWiki XML exports (``.xml``, ``.xml.bz2``, ``.xml.gz``), streamed in constant memory.

``iterparse`` walks the export; each ``<page>`` element is read and then cleared (with
the root's reference to it), so memory does not grow with the dump. Main-namespace pages
become :class:`Redirect` records (read here) or wikitext sent to the parser pool
(:mod:`wiki_sim.ingest.pool`); other namespaces are counted and skipped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest.compressed import open_compressed
from wiki_sim.ingest.pool import DEFAULT_PARSER, ParsePool, Skip
from wiki_sim.records import Page, Redirect, normalize_title

_REDIRECT_TEXT = re.compile(r"^\s*#redirect\s*:?\s*\[\[([^\]|]+)", re.I)
CHUNK_PAGES = 64
CHUNK_CHARS = 300_000
MAX_WIKITEXT_CHARS = 4 << 20
"""Longest wikitext parsed (4 Mi characters; the longest English articles have about 1.5 Mi).
Parsing costs ~60 bytes of worker memory per character (a 50 MB page: 2.9 GB), so longer
pages are skipped before they reach a worker, as ``too_large`` skips in build.json."""


@dataclass
class RawPage:
    title: str
    ns: int
    text: str
    redirect: str | None


def _read_error(path: Path, exc: BaseException) -> WikiSimError:
    if isinstance(exc, EOFError):
        return WikiSimError(f"{path} is truncated: compressed data ended early ({exc})")
    if isinstance(exc, ET.ParseError):
        return WikiSimError(f"{path} is not well-formed XML or is truncated: {exc}")
    return WikiSimError(f"{path} is corrupt: {exc}")


def check_dump(path: Path) -> None:
    """Fail fast on a file that is not a (readable) MediaWiki export: peek at its first bytes."""
    if not path.is_file():
        raise WikiSimError(f"dump {path} does not exist")
    if path.stat().st_size == 0:
        raise WikiSimError(f"dump {path} is empty")
    try:
        with open_compressed(path) as f:
            head = f.read(1 << 16)
    except (OSError, EOFError) as exc:
        raise _read_error(path, exc) from None
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if text.startswith("<?xml"):
        text = text[text.find("?>") + 2:].lstrip()
    while text.startswith("<!--"):
        text = text[text.find("-->") + 3:].lstrip()
    if not text.startswith("<mediawiki"):
        first = text[:40].splitlines()[0] if text.strip() else "(nothing)"
        raise WikiSimError(f"{path} is not a MediaWiki XML export (it starts with {first!r}, "
                           "expected <mediawiki ...>)")


def iter_raw_pages(path: Path, on_read: Callable[[int], None] | None = None,
                   namespaces: set[str] | None = None) -> Iterator[RawPage]:
    """Every ``<page>`` of the export, in order; fills ``namespaces`` from ``<siteinfo>``."""
    try:
        with open_compressed(path, on_read) as stream:
            context = ET.iterparse(stream, events=("start", "end"))
            _, root = next(context)
            if root.tag.rpartition("}")[2] != "mediawiki":
                raise WikiSimError(f"{path} is not a MediaWiki XML export (root element <{root.tag}>)")
            ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            for event, elem in context:
                if event != "end":
                    continue
                local = elem.tag[len(ns):]
                if local == "page":
                    yield _raw_page(elem, ns)
                    root.clear()
                elif local == "siteinfo":
                    if namespaces is not None:
                        namespaces.update(n.text.strip() for n in elem.iter(f"{ns}namespace") if n.text)
                    root.clear()
    except WikiSimError:
        raise
    except (OSError, EOFError, ET.ParseError) as exc:
        raise _read_error(path, exc) from None


_OLD_NS_PREFIXES = {"Talk", "User", "User talk", "Wikipedia", "Wikipedia talk", "File", "Image", "MediaWiki",
                    "Template", "Help", "Category", "Portal", "Draft", "Module"}


def _raw_page(elem: ET.Element, ns: str) -> RawPage:
    title = (elem.findtext(f"{ns}title") or "").strip()
    ns_text = elem.findtext(f"{ns}ns")
    if ns_text is not None and ns_text.strip().lstrip("-").isdigit():
        page_ns = int(ns_text)
    else:  # exports before 0.5 have no <ns>: a prefix before ':' marks another namespace
        page_ns = 1 if ":" in title and title.split(":", 1)[0] in _OLD_NS_PREFIXES else 0
    text = elem.findtext(f"{ns}revision/{ns}text") or ""
    red = elem.find(f"{ns}redirect")
    target = red.get("title") if red is not None else None
    if target is None:
        m = _REDIRECT_TEXT.match(text)
        target = m.group(1) if m else None
    return RawPage(title, page_ns, text, target)


class DumpReader:
    """Page/Redirect records of a dump, parsed by a :class:`ParsePool`; counts go to ``stats``."""

    def __init__(self, path: Path, *, workers: int, page_timeout: float, progress: bool,
                 stats: dict[str, Any], parser: str = DEFAULT_PARSER, hard_grace: float | None = None,
                 max_page_chars: int = MAX_WIKITEXT_CHARS):
        self.max_page_chars = max_page_chars
        self.path = path
        self.workers = workers
        self.page_timeout = page_timeout
        self.progress = progress
        self.stats = stats
        self.parser = parser
        self.hard_grace = hard_grace
        self.namespaces: set[str] = set()

    def _chunks(self, on_read: Callable[[int], None] | None) -> Iterator[tuple[list[tuple[str, str]], list]]:
        """``(pages to parse, entries)``: entries are Redirects or ``None`` placeholders for parsed pages."""
        items: list[tuple[str, str]] = []
        entries: list[Redirect | Skip | None] = []
        size = 0
        for raw in iter_raw_pages(self.path, on_read, self.namespaces):
            if raw.ns != 0:
                self.stats["non_main_namespace"] += 1
                continue
            if raw.redirect is not None:
                target = normalize_title(raw.redirect)
                if target:
                    entries.append(Redirect(normalize_title(raw.title), target))
                continue
            if not raw.text.strip():
                self.stats["empty"] += 1
                continue
            if len(raw.text) > self.max_page_chars:  # never sent to a worker: bounded parse memory
                entries.append(Skip(raw.title, f"wikitext of {len(raw.text)} characters is over the limit of "
                                               f"{self.max_page_chars}", "too_large"))
                continue
            items.append((raw.title, raw.text))
            entries.append(None)
            size += len(raw.text)
            if len(items) >= CHUNK_PAGES or size >= CHUNK_CHARS:
                yield items, entries
                items, entries, size = [], [], 0
        if entries:
            yield items, entries

    def __iter__(self) -> Iterator[Page | Redirect]:
        from tqdm import tqdm

        bar = tqdm(total=self.path.stat().st_size, unit="B", unit_scale=True, unit_divisor=1024,
                   desc=f"parse {self.path.name}", disable=not self.progress, dynamic_ncols=True)
        pool = ParsePool(self.workers, self.page_timeout, self.parser, (self.namespaces,),
                         hard_grace=self.hard_grace)
        stats = self.stats
        try:
            for results, entries in pool.imap(self._chunks(bar.update)):
                parsed = iter(results)
                for entry in entries:
                    record = entry if entry is not None else next(parsed)
                    if isinstance(record, Skip):
                        stats["skipped"] += 1
                        stats[f"skipped_{record.kind}"] = stats.get(f"skipped_{record.kind}", 0) + 1
                        if len(stats["skipped_titles"]) < 20:
                            stats["skipped_titles"].append(f"{record.title}: {record.reason}")
                        continue
                    if isinstance(record, Redirect):
                        stats["redirects"] += 1
                    else:
                        stats["pages"] += 1
                        stats["links"] += len(record.links)
                        stats["facts"] += len(record.facts)
                    yield record
                bar.set_postfix(pages=stats["pages"], redirects=stats["redirects"], skipped=stats["skipped"],
                                refresh=False)
        finally:
            stats["worker_restarts"] = pool.stats.restarts
            bar.close()
        if stats["pages"] == 0:
            raise WikiSimError(f"{self.path} contains no main-namespace articles")
