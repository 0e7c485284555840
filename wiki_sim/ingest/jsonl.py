"""JSONL corpora of any common shape: one document per line, fields named by :class:`JsonlFields`.

Shapes that build unchanged (the ``websailor wiki build --source jsonl`` options in brackets):

- ``{"title", "text"}`` (the default; markdown headings ``## History`` in the text become sections);
- wiki-18 / FlashRAG / Search-R1 ``{"id", "contents": "\\"Title\\"\\ntext"}``: detected by the
  ``contents`` field; consecutive 100-word passages of one title are merged into one page;
- BrowseComp-Plus ``{"docid", "url", "text"}`` [``--id-field docid --url-field url``]: a record with
  no title field takes its title from the text (a front-matter ``title:`` line, else the first
  line) and keeps its own URL in search hits and visits;
- KILT ``{"wikipedia_id", "wikipedia_title", "text": [paragraphs]}`` [``--title-field
  wikipedia_title --id-field wikipedia_id``] and HotpotQA ``{"title", "text": [sentences]}``:
  a text given as a list is joined (paragraphs ending in a newline by blank lines, sentences by spaces).

A title seen again later (not a consecutive passage) is the same document repeated when its
text is the same (skipped, counted in ``duplicates_skipped``), else another document of the
same name: renamed ``Title (ID)`` with its id, or ``Title (2)``, and counted in
``duplicate_titles``. Files may be plain, ``.bz2`` or ``.gz`` (detected by magic bytes).

Titles are kept as given apart from white space and the first letter (``C``, ``C#`` and ``C++``
are three pages); a title holding a control character (NUL) or a lone surrogate is an error.
A page is bounded as dump pages are: a line over :data:`MAX_LINE_BYTES` is skipped without
being held in memory, and a page over :data:`MAX_PAGE_CHARS` (passages merged) is skipped
too, both counted as ``too_large`` skips in build.json.

JSONL corpora have no links; :func:`iter_jsonl` reads the file twice: once for the titles and
how each page writes its own name, then again to find links with
:class:`~wiki_sim.ingest.entity_links.EntityLinker` (in ``workers`` forked processes,
:mod:`wiki_sim.ingest.link_pool`, results in file order). Bad lines raise
:class:`~wiki_sim.errors.WikiSimError` naming ``file:line``.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from wiki_sim.budget import release_free_memory
from wiki_sim.errors import WikiSimError
from wiki_sim.ingest.aliases import LEAD_HEAD_CHARS
from wiki_sim.ingest.compressed import open_compressed
from wiki_sim.ingest.entity_links import EntityLinker, usage_code
from wiki_sim.ingest.name_usage import own_usage
from wiki_sim.ingest.link_pool import LinkPassError, LinkPool, PageLinks, page_links
from wiki_sim.ingest.name_table import SeenTitles, TitleList
from wiki_sim.ingest.xml_dump import MAX_WIKITEXT_CHARS
from wiki_sim.records import Page, canonical_title

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FRONT_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
MAX_TITLE_CHARS = 200
"""A title taken from a document's first line is cut to this many characters (at a space)."""
MAX_PAGE_CHARS = MAX_WIKITEXT_CHARS
"""Longest page text kept (the dump's cap): a longer page is skipped as ``too_large``."""
MAX_LINE_BYTES = 4 * MAX_PAGE_CHARS
"""Longest JSONL line read (UTF-8 holds a character in at most 4 bytes): a longer line is
skipped as it streams past, never held whole."""
_BAD_TITLE_CHARS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True)
class JsonlFields:
    """Which JSON fields of a line hold what; ``None``: the default shape (see the module docstring)."""

    title: str | None = None
    """Field of the page title (default ``title``; wiki-18 lines carry it in ``contents``; absent
    in a record: taken from the text)."""
    text: str | None = None
    """Field of the text, a string or a list of strings (default ``text``, or wiki-18 ``contents``)."""
    url: str | None = None
    """Field of the document's own URL (default: none, the page gets its Wikipedia URL)."""
    id: str | None = None
    """Field of the document id (names apart two documents with the same title)."""

    def __post_init__(self) -> None:
        for name in ("title", "text", "url", "id"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise WikiSimError(f"--{name}-field must be a non-empty field name, got {value!r}")


@dataclass
class _Doc:
    title: str
    text: str
    url: str
    doc_id: str
    passage: bool
    too_large: str = ""
    """Why the page is skipped for its size ("" when it is not)."""


def split_sections(text: str) -> tuple[str, list[str]]:
    """``(lead, headings)`` of a text whose headings are markdown ``## Title`` lines."""
    lead_lines: list[str] = []
    headings: list[str] = []
    for line in text.split("\n"):
        m = _HEADING.match(line)
        if m:
            headings.append(m.group(2))
        elif not headings:
            lead_lines.append(line)
    return "\n".join(lead_lines).strip(), headings


def title_from_text(text: str) -> str:
    """A title for a document that has none: its front-matter ``title:``, else its first line."""
    head = text[:4000]
    if head.startswith("---"):
        end = head.find("\n---", 3)
        m = _FRONT_TITLE.search(head, 3, end if end > 0 else len(head))
        if m:
            return m.group(1).strip("\"'")[:MAX_TITLE_CHARS]
    for line in head.split("\n"):
        line = line.strip().lstrip("#").strip()
        if line and line != "---":
            if len(line) > MAX_TITLE_CHARS:
                cut = line.rfind(" ", 0, MAX_TITLE_CHARS)
                line = line[:cut if cut > 40 else MAX_TITLE_CHARS]
            return line
    return ""


def _join(value: Any, where: str, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if any(v.endswith("\n") for v in value):
            return "\n\n".join(v.strip() for v in value if v.strip())
        return " ".join(v.strip() for v in value if v.strip())
    raise WikiSimError(f'{where}: field "{field}" must be a string or a list of strings, got {type(value).__name__}')


def _optional(obj: dict, field: str | None, where: str) -> str:
    if field is None or obj.get(field) is None:
        return ""
    value = obj[field]
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value).strip()
    raise WikiSimError(f'{where}: field "{field}" must be a string or a number, got {type(value).__name__}')


def _record(path: Path, lineno: int, line: bytes, fields: JsonlFields) -> _Doc:
    """One line as a document, or a WikiSimError naming the line."""
    where = f"{path}:{lineno}"
    try:
        obj = json.loads(line)
    except RecursionError:
        raise WikiSimError(f"{where}: malformed JSONL line (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise WikiSimError(f"{where}: malformed JSONL line ({str(exc)[:200]})") from None
    if not isinstance(obj, dict):
        raise WikiSimError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    url, doc_id = _optional(obj, fields.url, where), _optional(obj, fields.id, where)
    text_field = fields.text or ("contents" if "contents" in obj and fields.title is None else "text")
    title_field = fields.title or "title"
    if text_field not in obj:
        if fields.text is None and fields.title is None:
            raise WikiSimError(f'{where}: expected string fields {{"title", "text"}} or {{"id", "contents"}}, '
                               f"got keys {sorted(obj)} (name them with --title-field/--text-field)")
        raise WikiSimError(f'{where}: no field "{text_field}" (--text-field); the line has keys {sorted(obj)}')
    if text_field == "contents" and title_field not in obj:
        contents = obj["contents"]
        if not isinstance(contents, str) or "\n" not in contents:
            raise WikiSimError(f'{where}: wiki-18 "contents" must be a string "\\"Title\\"\\ntext"')
        head, text = contents.split("\n", 1)
        head = head.strip()
        title = head[1:-1] if len(head) >= 2 and head[0] == head[-1] == '"' else head
        return _Doc(_title(title, where), text.strip(), url, doc_id, True)
    text = _join(obj[text_field], where, text_field).strip()
    if title_field in obj:
        title = obj[title_field]
        if not isinstance(title, str):
            raise WikiSimError(f'{where}: field "{title_field}" must be a string, got {type(title).__name__}')
    elif fields.title is not None:
        raise WikiSimError(f'{where}: no field "{title_field}" (--title-field); the line has keys {sorted(obj)}')
    else:
        title = title_from_text(text) or doc_id or url
    return _Doc(_title(title, where), text, url, doc_id, False)


def _title(title: str, where: str) -> str:
    """``title`` as stored (:func:`~wiki_sim.records.canonical_title`), or a WikiSimError naming the line."""
    bad = _BAD_TITLE_CHARS.search(title)
    if bad:
        what = "a lone surrogate" if "\ud800" <= bad.group() <= "\udfff" else "a control character"
        raise WikiSimError(f"{where}: the title holds {what} ({bad.group()!a} at {bad.start()}), which no page "
                           "title may hold")
    return canonical_title(title)


def _lines(f: Any) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)``; ``None`` for a line over :data:`MAX_LINE_BYTES`, read past in
    bounded pieces."""
    lineno = 0
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            del line
            while True:
                rest = f.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield lineno, None
        else:
            yield lineno, line


def _documents(path: Path, fields: JsonlFields, stats: dict[str, Any], progress: bool,
               desc: str) -> Iterator[tuple[int, Page]]:
    """``(line, page)``: pages (without links) in file order, each with the line it starts on:
    passages merged, repeated titles skipped or renamed."""
    from tqdm import tqdm

    if not path.is_file():
        raise WikiSimError(f"JSONL corpus {path} does not exist")
    bar = tqdm(total=path.stat().st_size, unit="B", unit_scale=True, unit_divisor=1024, desc=f"{desc} {path.name}",
               disable=not progress, dynamic_ncols=True)
    first_text = SeenTitles()  # title -> crc32 of its text: a repeat is skipped, a namesake renamed
    current: _Doc | None = None
    current_line = 0
    parts: list[str] = []
    try:
        with open_compressed(path, bar.update) as f:
            for lineno, line in _lines(f):
                if line is None:
                    stats["lines"] += 1
                    _skip(stats, f"{path.name}:{lineno}", f"a line of over {MAX_LINE_BYTES} bytes")
                    continue
                if not line.strip():
                    continue
                stats["lines"] += 1
                doc = _record(path, lineno, line, fields)
                del line
                if not doc.title:
                    raise WikiSimError(f"{path}:{lineno}: empty title")
                if len(doc.text) > MAX_PAGE_CHARS:
                    doc.too_large = f"text of {len(doc.text)} characters is over the limit of {MAX_PAGE_CHARS}"
                    doc.text = ""
                if doc.passage and current is not None and current.passage and doc.title == current.title:
                    stats["passages_merged"] += 1
                    if not current.too_large:
                        parts.append(doc.text)
                        current.too_large = doc.too_large
                        if sum(map(len, parts)) > MAX_PAGE_CHARS:
                            current.too_large = f"passages of over {MAX_PAGE_CHARS} characters in all"
                        if current.too_large:
                            parts = []
                    continue
                if current is not None:
                    yield from _page(current, current_line, parts, stats, first_text)
                current, current_line, parts = doc, lineno, [doc.text]
            if current is not None:
                yield from _page(current, current_line, parts, stats, first_text)
    except (OSError, EOFError) as exc:
        raise WikiSimError(f"{path} is corrupt or truncated: {exc}") from None
    finally:
        bar.close()
    if stats["pages"] == 0:
        raise WikiSimError(f"{path} holds no pages (empty corpus)")


def _skip(stats: dict[str, Any], name: str, reason: str) -> None:
    """Count a page skipped for its size, as the dump's ``too_large`` skips are counted."""
    stats["skipped"] = stats.get("skipped", 0) + 1
    stats["skipped_too_large"] = stats.get("skipped_too_large", 0) + 1
    titles = stats.setdefault("skipped_titles", [])
    if len(titles) < 20:
        titles.append(f"{name}: {reason}")


def _page(doc: _Doc, lineno: int, parts: list[str], stats: dict[str, Any],
          first_text: SeenTitles) -> Iterator[tuple[int, Page]]:
    if doc.too_large:
        _skip(stats, doc.title[:MAX_TITLE_CHARS], doc.too_large)
        return
    text = "\n\n".join(p for p in parts if p)
    if not text:
        stats["empty"] += 1
        return
    title, digest = doc.title, zlib.crc32(text.encode("utf-8", "surrogatepass"))
    seen = first_text.get(title)
    if seen is not None:
        if seen == digest:
            stats["duplicates_skipped"] = stats.get("duplicates_skipped", 0) + 1
            return
        n, base = 2, title
        title = f"{base} ({doc.doc_id})" if doc.doc_id else f"{base} (2)"
        while title in first_text:
            n += 1
            title = f"{base} ({n})"
        stats["duplicate_titles"] = stats.get("duplicate_titles", 0) + 1
    first_text.add(title, digest)
    lead, sections = split_sections(text)
    stats["pages"] += 1
    yield lineno, Page(title=title, text=text, lead=lead, sections=sections, url=doc.url,
                       facts=[("doc_id", doc.doc_id, "corpus_id")] if doc.doc_id else [])


def iter_jsonl(path: Path, stats: dict[str, Any], progress: bool = False,
               fields: JsonlFields | None = None, workers: int = 1) -> Iterator[Page]:
    """Pages of a JSONL corpus in file order, with links derived from their text and their other names.

    ``workers`` > 1: the link pass runs in that many forked processes
    (:class:`~wiki_sim.ingest.link_pool.LinkPool`) when the corpus has more than one batch of
    pages; the pages, their links and their order are the same as with one."""
    fields = fields or JsonlFields()
    scan: dict[str, Any] = {k: (0 if isinstance(v, int) else [] if isinstance(v, list) else v)
                            for k, v in stats.items()}
    # The first pass keeps the titles in one blob and a byte a page: bounded by the corpus's
    # titles, not by per-title Python objects (wiki_sim.ingest.name_table).
    titles, usage = TitleList(), bytearray()
    for _, page in _documents(path, fields, scan, progress, "scan"):
        titles.append(page.title)
        usage.append(usage_code(*own_usage(page.title, page.text)))
    linker = EntityLinker(titles)
    linker.set_usage_codes(usage)
    del usage
    release_free_memory()  # the tables' temporaries, before the link workers fork
    pages = _checked(path, titles, _documents(path, fields, stats, progress, "read"))
    if workers <= 1 or len(titles) <= BATCH_PAGES:  # one batch: no process to start
        linked: Iterator[tuple[Page, PageLinks]] = (
            (page, page_links(linker, page.title, page.text, page.lead)) for _, page in pages)
    else:
        linked = _linked_in_workers(path, linker, pages, workers)
    for page, (links, starts, aliases) in linked:
        page.links, page.link_starts, page.aliases = links, starts, aliases
        stats["links"] += len(links)
        stats["facts"] += len(page.facts)
        yield page


def _checked(path: Path, titles: TitleList, pages: Iterator[tuple[int, Page]]) -> Iterator[tuple[int, Page]]:
    """The second pass's pages, each checked against the first pass's title at its place."""
    for i, (lineno, page) in enumerate(pages):
        if i >= len(titles) or titles[i] != page.title:  # the file changed between the two passes
            raise WikiSimError(f"{path} changed while it was read (page {i + 1} is {page.title!r} now); "
                               "build again from a file that is not being written")
        yield lineno, page


BATCH_PAGES = 256
"""Pages a link worker gets at a time (fewer when they hold :data:`BATCH_CHARS`)."""
BATCH_CHARS = 1 << 21
"""Characters of text a batch holds at most (past its first page): with ``3 x workers`` batches
in flight, the pass holds a few tens of MB of pages whatever the corpus."""


def _batches(pages: Iterator[tuple[int, Page]]) -> Iterator[tuple[list[tuple[str, str, str]],
                                                                   list[tuple[int, Page]]]]:
    batch: list[tuple[int, Page]] = []
    chars = 0
    for lineno, page in pages:
        if batch and (len(batch) >= BATCH_PAGES or chars + len(page.text) > BATCH_CHARS):
            yield _items(batch), batch
            batch, chars = [], 0
        batch.append((lineno, page))
        chars += len(page.text)
    if batch:
        yield _items(batch), batch


def _items(batch: list[tuple[int, Page]]) -> list[tuple[str, str, str]]:
    """What a link worker needs of each page: its title, text and the head of its lead (all the
    aliases read), so a page without sections does not travel twice."""
    return [(p.title, p.text, p.lead[:LEAD_HEAD_CHARS]) for _, p in batch]


def _linked_in_workers(path: Path, linker: EntityLinker, pages: Iterator[tuple[int, Page]],
                       workers: int) -> Iterator[tuple[Page, PageLinks]]:
    pool = LinkPool(linker, workers)
    try:
        for results, batch in pool.imap(_batches(pages)):
            for (_, page), result in zip(batch, results):
                yield page, result
    except LinkPassError as exc:
        batch = exc.extra
        if exc.index is None:
            lines = f"{batch[0][0]}-{batch[-1][0]}" if len(batch) > 1 else str(batch[0][0])
            raise WikiSimError(f"{path}:{lines}: finding links failed in pages {batch[0][1].title!r} to "
                               f"{batch[-1][1].title!r}: {exc.reason}") from None
        lineno, page = batch[exc.index]
        raise WikiSimError(f"{path}:{lineno}: finding links in page {page.title!r} failed: {exc.reason}") from None
