"""One article's wikitext -> :class:`~wiki_sim.records.Page` (plain text, headings, links, facts).

Parsed with mwparserfromhell, then rendered node by node:

- text, bold/italic, most HTML-like tags: their text;
- ``<ref>``, comments, files/images, categories, interlanguage links, galleries: dropped;
- wikilinks: their anchor text (with MediaWiki's link trail: ``[[bus]]es`` -> ``buses``),
  recorded as ``(normalized target, anchor)``; links to other namespaces keep their text only;
- headings: ``## Title`` on their own line; the reference-list sections (References,
  External links, Notes, ...) are dropped whole;
- tables: one line per row, cells joined by `` | ``; lists: ``- item`` lines;
- templates: see :mod:`wiki_sim.ingest.templates` (content-carrying ones rendered,
  infoboxes to facts, the rest dropped).
"""

from __future__ import annotations

import html
import re
from typing import Iterable

import mwparserfromhell
from mwparserfromhell.nodes import (Argument, Comment, ExternalLink, Heading, HTMLEntity, Node, Tag, Template,
                                    Text, Wikilink)
from mwparserfromhell.wikicode import Wikicode

from wiki_sim.ingest.templates import render_template
from wiki_sim.ingest.tex import tex_to_text
from wiki_sim.ingest.aliases import bold_names, lead_aliases, title_names
from wiki_sim.records import Page, normalize_title

# Namespaces of English Wikipedia (and their aliases) that main-namespace links never point into.
NAMESPACES = frozenset(
    "talk user wikipedia wp project file image media mediawiki template help category portal book draft "
    "timedtext module gadget special topic education program".split()
    + ["user talk", "wikipedia talk", "file talk", "image talk", "mediawiki talk", "template talk", "help talk",
       "category talk", "portal talk", "book talk", "draft talk", "timedtext talk", "module talk",
       "gadget definition", "education program", "wikipedia talk", "wt", "h", "t", "cat", "mos"]
)
DROP_NAMESPACES = frozenset({"file", "image", "media", "category", "cat"})
INTERWIKI = frozenset(
    "wikt wiktionary s wikisource commons c q wikiquote n wikinews b wikibooks v wikiversity voy wikivoyage "
    "species wikispecies d wikidata m meta mw mediawikiwiki foundation wmf phab w wikimedia oldwikisource "
    "imdbname imdbtitle google doi arxiv rfc iarchive".split()
)
_LANG_PREFIX = re.compile(r"^(?:[a-z]{2,3}(?:-[a-z0-9]+)*|simple)$")
_LINK_TRAIL = re.compile(r"^[a-z]+")
# Section bodies that are reference lists, not article text.
BOILERPLATE_SECTIONS = frozenset([
    "references", "notes", "footnotes", "citations", "sources", "external links", "further reading",
    "notes and references", "references and notes", "works cited", "general references", "explanatory notes",
    "notes and citations", "citations and notes", "references and further reading", "sources and further reading",
    "external links and further reading", "bibliography and references",
])
DROP_TAGS = frozenset(
    "ref references gallery imagemap timeline graph templatestyles mapframe maplink score categorytree "
    "indicator includeonly inputbox hiero charinsert section templatedata".split()
)
RAW_TAGS = frozenset("nowiki pre source syntaxhighlight math chem ce code".split())
_MAGIC = re.compile(r"__[A-Z]{3,}__")
_STRAY = re.compile(
    r"\{\{|\}\}|\[\[|\]\]|\{\||\|\}|'{2,}|</?(?:ref|references|span|div|small|big|br|sup|sub|center|font|abbr|"
    r"code|nowiki|gallery|blockquote|poem|math|table|tr|td|th|p|li|ul|ol|s|u|b|i)\b[^>\n]{0,300}>", re.I)
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+([,.;:!?)\]])")
_EMPTY_PAREN_LEAD = re.compile(r"([(\[])\s*[;,:]\s*")
_EMPTY_PARENS = re.compile(r"\(\s*\)|\[\s*\]")
# What dropped templates leave behind: "( al-Jaza'ir", "Akhilleus,)", "such as,, or".
_PAREN_INNER_SPACE = re.compile(r"(\()\s+")
_REPEATED_SEP = re.compile(r"([,;])(?:\s*[,;])+")
_PUNCT_BEFORE_CLOSE = re.compile(r"\s*[,;]\s*([.)])")
_HSPACE = re.compile(r"[ \t\u00a0\u2009\u200b]+")
_TEXT_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]]*)\]\]")
_CELL_SPLIT = re.compile(r"\|\||!!")
_CELL_ATTRS = re.compile(r"""^\s*(?:[\w-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s|"']+)\s*)+$""")
_BULLET = re.compile(r"^[-•*]\s+")
_JUNK_LINE = re.compile(r"^[-\s•·|,;:*#]*$")
HEADING_MARK = "\x01"
_COMMENT_RE = re.compile(r"<!--.*?(?:-->|$)", re.S)
_REF = re.compile(r"<ref\b[^>]*?/>|<ref\b[^>]*>.*?</ref\s*>", re.S | re.I)
_FILE_OPEN = re.compile(r"\[\[\s*:?\s*(?:file|image|media)\s*:", re.I)


class Renderer:
    """Renders a parsed page to text while collecting links, facts and section headings."""

    def __init__(self, namespaces: Iterable[str] = ()):
        self.namespaces = NAMESPACES | {n.lower() for n in namespaces}
        self.links: list[tuple[str, str]] = []
        self.facts: list[tuple[str, str, str]] = []
        self.sections: list[str] = []
        self.fact_targets: dict[int, str] = {}
        self.hidden_links: set[int] = set()
        self._value_links: list[tuple[str, str]] = []

    # -- the RendererLike protocol used by templates.py
    def add_link(self, target: str, anchor: str) -> None:
        target, _, shown = target.partition("|")  # a template param holding "Target|text"
        title = normalize_title(target.lstrip(":"))
        prefix, sep, _ = title.partition(":")
        if not title or sep and (prefix.lower() in self.namespaces or prefix.lower() in INTERWIKI
                                 or _LANG_PREFIX.match(prefix)):
            return
        self.links.append((title, _HSPACE.sub(" ", shown or anchor).strip() or title))

    def add_fact(self, key: str, value: str, source: str) -> None:
        # An infobox value was rendered by fact_value just before; its first link is the target.
        if self._value_links and source.startswith("infobox:"):
            self.fact_targets[len(self.facts)] = self._value_links[0][0]
        self._value_links = []
        self.facts.append((key, value, source))

    def fact_value(self, code: Wikicode) -> str:
        """A field value as one line: list items and line breaks joined with ``; ``.

        The links it holds are remembered for the next :meth:`add_fact` (the fact's target)."""
        n_links = len(self.links)
        text = clean_text(self.render(code))
        self._value_links = self.links[n_links:]
        parts = [_BULLET.sub("", ln.strip()) for ln in text.splitlines()]
        return "; ".join(p for p in parts if p and not p.startswith(HEADING_MARK)).strip(" ,;")

    # -- rendering
    def render(self, code: Wikicode) -> str:
        out: list[str] = []
        nodes = code.nodes
        trail_skip = 0
        for i, node in enumerate(nodes):
            if isinstance(node, Text):
                out.append(node.value[trail_skip:])
                trail_skip = 0
                continue
            trail_skip = 0
            if isinstance(node, Wikilink):
                nxt = nodes[i + 1] if i + 1 < len(nodes) else None
                trail = ""
                if isinstance(nxt, Text):
                    m = _LINK_TRAIL.match(nxt.value)
                    if m:
                        trail = m.group(0)
                n_links = len(self.links)
                out.append(self._wikilink(node))
                if trail and out[-1]:
                    trail_skip = len(trail)
                    out[-1] += trail
                    if len(self.links) > n_links:
                        self._extend_last_anchor(trail)
            else:
                out.append(self._node(node))
        return "".join(out)

    def _extend_last_anchor(self, trail: str) -> None:
        if self.links:
            target, anchor = self.links[-1]
            self.links[-1] = (target, anchor + trail)

    def _node(self, node: Node) -> str:
        if isinstance(node, Template):
            n_links = len(self.links)
            text = render_template(node, self)
            if not text.strip():  # an infobox, a hatnote: its links are not in the text
                self.hidden_links.update(range(n_links, len(self.links)))
            return text
        if isinstance(node, Tag):
            return self._tag(node)
        if isinstance(node, HTMLEntity):
            return node.normalize()
        if isinstance(node, ExternalLink):
            return self.render(node.title) if node.title is not None else ("" if node.brackets else str(node.url))
        if isinstance(node, Heading):
            title = clean_text(self.render(node.title)).strip().strip("=").strip()
            return f"\n\n{HEADING_MARK}{node.level}{title}\n\n" if title else "\n\n"
        if isinstance(node, (Comment, Argument)):
            return ""
        return ""

    def _wikilink(self, link: Wikilink) -> str:
        raw = html.unescape(str(link.title)).strip()
        colon = raw.startswith(":")
        target = raw.lstrip(":").strip()
        prefix, sep, _ = target.partition(":")
        plow = prefix.strip().lower()
        if sep and not colon and (plow in DROP_NAMESPACES or _LANG_PREFIX.match(prefix.strip())):
            return ""  # an image, a category tag, or an interlanguage link: not part of the text
        if link.text is None:
            plain = not any(c in raw for c in "{<'&")  # the common case needs no rendering
            anchor = target if plain else clean_text(self.render(link.title)).lstrip(":").strip()
        else:
            anchor = self.render(link.text).strip()
            if not anchor and not str(link.text):  # the pipe trick: [[Foo (bar)|]] shows "Foo"
                anchor = re.sub(r"\s*\([^)]*\)$", "", target.split(":", 1)[-1])
        if sep and (plow in self.namespaces or plow in INTERWIKI or _LANG_PREFIX.match(prefix.strip())):
            return anchor
        if not target.startswith("#"):
            self.add_link(target, anchor)
        return anchor

    def _tag(self, tag: Tag) -> str:
        name = str(tag.tag).strip().lower()
        if name in DROP_TAGS:
            return ""
        if name == "math":  # readable text, not raw TeX and not a hole in the sentence
            return tex_to_text(html.unescape(str(tag.contents))) if tag.contents is not None else ""
        if name in RAW_TAGS:
            return html.unescape(str(tag.contents)) if tag.contents is not None else ""
        if name == "table":
            return self._table(tag)
        if name == "br" or name == "hr":
            return "\n"
        if name == "li":
            return "- " if tag.wiki_markup else self._contents(tag) + "\n"
        if name in ("dt", "dd"):
            return " " if tag.wiki_markup else self._contents(tag) + " "
        if name in ("p", "div", "blockquote", "poem", "center", "ul", "ol", "dl"):
            return "\n" + self._contents(tag) + "\n"
        return self._contents(tag)

    def _contents(self, tag: Tag) -> str:
        return self.render(tag.contents) if tag.contents is not None else ""

    def _table(self, table: Tag) -> str:
        rows: list[list[str]] = []
        cells: list[str] = []
        for node in table.contents.nodes if table.contents is not None else []:
            if not isinstance(node, Tag):
                continue
            name = str(node.tag).strip().lower()
            if name == "tr":
                if cells:
                    rows.append(cells)
                rows.append([self._cell(c) for c in node.contents.nodes
                             if isinstance(c, Tag) and str(c.tag).strip().lower() in ("td", "th")])
                cells = []
            elif name in ("td", "th"):
                cell = self._cell(node)
                if node.wiki_markup == "|" and str(node.contents).startswith("+"):
                    rows.append([cell[1:].strip()])  # "|+ caption": mwparserfromhell reads it as a cell
                else:
                    cells.append(cell)
            elif name == "caption":
                rows.append([self._cell(node)])
        if cells:
            rows.append(cells)
        lines = [" | ".join(c for c in row if c) for row in rows]
        return "\n\n" + "\n".join(ln for ln in lines if ln) + "\n\n"

    def _cell(self, cell: Tag) -> str:
        # The page's final clean_text tidies the cell; here it only has to fit on one line.
        # Rows that mwparserfromhell left inside a cell as text lose their markup first.
        lines = [_table_markup_line(ln.strip()) for ln in self._contents(cell).split("\n")]
        return _HSPACE.sub(" ", " ".join(ln for ln in lines if ln)).strip()


def clean_text(text: str) -> str:
    """Tidy rendered text: stray markup, spaces, empty brackets, junk lines, blank-line runs."""
    lines = []
    for line in _MAGIC.sub("", text).split("\n"):
        line = _HSPACE.sub(" ", line).strip()
        if line.startswith(HEADING_MARK):
            lines.append(line)
            continue
        if line[:1] in ("{", "|", "!"):
            line = _table_markup_line(line)
        if "[[" in line:  # links mwparserfromhell left as text (inside markup it gave up on)
            line = _TEXT_LINK.sub(lambda m: "" if _FILE_OPEN.match(m.group(0)) else m.group(1), line)
        line = _STRAY.sub("", line)
        prev = None
        while prev != line:
            prev = line
            line = _EMPTY_PARENS.sub("", _EMPTY_PAREN_LEAD.sub(r"\1", _SPACE_BEFORE_PUNCT.sub(r"\1", line)))
            line = _PUNCT_BEFORE_CLOSE.sub(r"\1", _REPEATED_SEP.sub(r"\1", _PAREN_INNER_SPACE.sub(r"\1", line)))
        line = _HSPACE.sub(" ", line).strip()
        if line.startswith("#"):
            line = line.lstrip("#").strip()
        lines.append("" if _JUNK_LINE.match(line) else line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _table_markup_line(line: str) -> str:
    """A table row mwparserfromhell left as text (it gives up on tables with unbalanced
    markup in a cell): its cells' text joined by `` | ``, without the cell attributes."""
    if line[:1] not in ("{", "|", "!"):
        return line
    if line.startswith(("{|", "|}", "|-")):
        return ""
    if not line.startswith(("|", "!")):
        return line
    cells = []
    for cell in _CELL_SPLIT.split(line.lstrip("|+!")):
        attrs, bar, content = cell.partition("|")
        if bar and _CELL_ATTRS.match(attrs) and "[[" not in attrs:
            cell = content
        cell = cell.strip()
        if cell:
            cells.append(cell)
    return " | ".join(cells)


def preprocess(wikitext: str) -> str:
    """Cut what never reaches the text before parsing: comments, ``<ref>`` contents, file embeds.

    References are a third of a typical article's wikitext (citation templates), and
    mwparserfromhell's tree building is the slow part, so dropping them first halves the
    work. File embeds are cut with bracket counting because captions with unbalanced
    markup otherwise leak into the text as raw ``File:...|thumb|...``.
    """
    return _strip_files(_REF.sub("", _COMMENT_RE.sub("", wikitext)))


def _strip_files(text: str) -> str:
    if "[[" not in text:
        return text
    out: list[str] = []
    pos = 0
    for m in _FILE_OPEN.finditer(text):
        start = m.start()
        if start < pos:
            continue  # nested in a file embed already cut
        depth, i = 0, start
        while i < len(text):
            if text.startswith("[[", i):
                depth += 1
                i += 2
            elif text.startswith("]]", i):
                depth -= 1
                i += 2
                if depth == 0:
                    break
            elif text[i] == "\n" and text.startswith("\n\n", i):
                break  # an unclosed embed ends at the paragraph, as MediaWiki renders it
            else:
                i += 1
        out.append(text[pos:start])
        pos = i
    out.append(text[pos:])
    return "".join(out)


def parse_page(title: str, wikitext: str, namespaces: Iterable[str] = ()) -> Page:
    """Parse one main-namespace article into a :class:`Page`."""
    cleaned = preprocess(wikitext)
    code = mwparserfromhell.parse(cleaned)
    r = Renderer(namespaces)
    parts: list[str] = []
    skip_level = 0  # > 0 while inside a dropped reference-list section of that level
    for node in _top_level_runs(code):
        if isinstance(node, Heading):
            if skip_level and node.level > skip_level:
                continue
            skip_level = 0
            if node.level <= 2 and node.title.strip_code().strip().lower() in BOILERPLATE_SECTIONS:
                skip_level = node.level
                continue
            heading = clean_text(r.render(node.title)).strip().strip("=").strip()
            if heading:
                r.sections.append(heading)
                parts.append(f"\n\n{HEADING_MARK}{node.level}{heading}\n\n")
            continue
        if not skip_level:
            parts.append(r.render(node))
    page = _assemble(title, clean_text("".join(parts)), r)
    page.aliases = list(dict.fromkeys(title_names(title) + bold_names(title, cleaned)
                                      + lead_aliases(title, page.lead)))
    return page


def _top_level_runs(code: Wikicode) -> Iterable[Node | Wikicode]:
    """Headings one by one; the nodes between them as one Wikicode run (keeps link trails intact)."""
    run: list[Node] = []
    for node in code.nodes:
        if isinstance(node, Heading):
            if run:
                yield Wikicode(run)
                run = []
            yield node
        else:
            run.append(node)
    if run:
        yield Wikicode(run)


def _assemble(title: str, text: str, r: Renderer) -> Page:
    out: list[str] = []
    lead_end = None
    for line in text.split("\n"):
        if line.startswith(HEADING_MARK):
            if lead_end is None:
                lead_end = len(out)
            level = int(line[1])
            out.append("#" * level + " " + line[2:].strip())
        else:
            out.append(line)
    lead = "\n".join(out[:lead_end] if lead_end is not None else out).strip()
    return Page(title=title, text="\n".join(out).strip(), lead=lead, sections=list(r.sections),
                links=r.links, hidden_links=r.hidden_links, facts=r.facts, fact_targets=r.fact_targets)
