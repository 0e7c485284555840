"""JSONL corpora: ``{"title", "text"}`` per line, or wiki-18 / FlashRAG ``{"id", "contents"}``.

wiki-18 (the DPR Wikipedia passages used by Search-R1 and FlashRAG) stores 100-word
passages, ``contents`` being ``"Title"`` on the first line and the passage after it;
consecutive passages of one title are merged into one :class:`Page` (paragraphs joined
with a blank line). The format is detected per line, so the two may be mixed. In
``{"title", "text"}`` lines, markdown headings (``## History``) in the text become the
page's sections. Files may be plain, ``.bz2`` or ``.gz`` (detected by magic bytes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest.compressed import open_compressed
from wiki_sim.records import Page, normalize_title

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


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


def _record(path: Path, lineno: int, line: bytes) -> tuple[str, str, bool]:
    """``(title, text, is_passage)`` of one line, or a WikiSimError naming the line."""
    where = f"{path}:{lineno}"
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WikiSimError(f"{where}: malformed JSONL line ({exc})") from None
    if not isinstance(obj, dict):
        raise WikiSimError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str) or "\n" not in contents:
            raise WikiSimError(f'{where}: wiki-18 "contents" must be a string "\\"Title\\"\\ntext"')
        head, text = contents.split("\n", 1)
        head = head.strip()
        title = head[1:-1] if len(head) >= 2 and head[0] == head[-1] == '"' else head
        return normalize_title(title), text.strip(), True
    title, text = obj.get("title"), obj.get("text")
    if not isinstance(title, str) or not isinstance(text, str):
        raise WikiSimError(f'{where}: expected string fields {{"title", "text"}} or {{"id", "contents"}}, '
                           f"got keys {sorted(obj)}")
    return normalize_title(title), text.strip(), False


def iter_jsonl(path: Path, stats: dict[str, Any], progress: bool = False) -> Iterator[Page]:
    """Pages of a JSONL corpus, in file order (merged wiki-18 passages count as one page)."""
    from tqdm import tqdm

    if not path.is_file():
        raise WikiSimError(f"JSONL corpus {path} does not exist")
    size = path.stat().st_size
    bar = tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc=f"read {path.name}",
               disable=not progress, dynamic_ncols=True)
    title: str | None = None
    parts: list[str] = []
    try:
        with open_compressed(path, bar.update) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                stats["lines"] += 1
                t, text, is_passage = _record(path, lineno, line)
                if not t:
                    raise WikiSimError(f"{path}:{lineno}: empty title")
                if is_passage and t == title:
                    parts.append(text)
                    stats["passages_merged"] += 1
                    continue
                if title is not None:
                    yield from _page(title, parts, stats)
                title, parts = t, [text]
            if title is not None:
                yield from _page(title, parts, stats)
    except (OSError, EOFError) as exc:
        raise WikiSimError(f"{path} is corrupt or truncated: {exc}") from None
    finally:
        bar.close()
    if stats["pages"] == 0:
        raise WikiSimError(f"{path} holds no pages (empty corpus)")


def _page(title: str, parts: list[str], stats: dict[str, Any]) -> Iterator[Page]:
    text = "\n\n".join(p for p in parts if p)
    if not text:
        stats["empty"] += 1
        return
    lead, sections = split_sections(text)
    stats["pages"] += 1
    yield Page(title=title, text=text, lead=lead, sections=sections)
