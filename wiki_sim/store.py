"""The simulator's SQLite store: pages, redirects, links, facts and build metadata.

Written once per build with sqlite-utils (:class:`StoreWriter`), then opened read-only
(:class:`Store`) by every consumer. Schema:

- ``pages(id, title UNIQUE, url, lead, text, sections JSON, inbound_links)``: ``url`` is the
  page's Wikipedia URL, or the document's own URL for a corpus of web pages; ``lead`` is
  ``NULL`` when it is the whole text (a page without sections: the text is stored once;
  readers take ``COALESCE(lead, text)``); ``inbound_links`` (distinct pages with a resolved
  link into this one) is filled at finalize
- ``redirects(alias PRIMARY KEY, target)``: every alias points at an existing page title
- ``links(source, target, anchor, sent_start, sent_end, resolved)``: ``target`` resolved
  through redirects at finalize, ``resolved`` 1 when it names a page of the store (0: a
  dangling link); ``text[sent_start:sent_end]`` of the source page is the sentence that
  shows the link (``0, 0`` when the anchor is not in the text, e.g. an infobox value)
- ``names(page, name, source)``: other names of a page found in the page itself (``title``: the
  title without its disambiguator; ``lead``: "also known as", "or", a native name in the
  defining sentence; ``bold``: a dump lead's bold names); redirects are in ``redirects``
- ``facts(page, key, value, source, target)``: ``target`` the page the value links to
  (resolved through redirects), ``NULL`` when it links to none in the store
- ``meta(key PRIMARY KEY, value JSON)``: source, counts, versions, build time, ``store_format``

Indexed by title, url, alias, name, link source, link target, and fact page.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal


from wiki_sim.errors import WikiSimError
from wiki_sim.records import LinkInfo, Page, PageInfo, Redirect, canonical_title, normalize_title, title_to_url
from wiki_sim.sentences import locate_anchors, locate_spans

STORE_FILE = "store.sqlite"
STORE_FORMAT = 4
"""Bumped when the schema changes; a store of another format must be rebuilt.
2: link sentences, resolved flag, fact targets, inbound link counts.
3: documents' own URLs, the ``names`` table, derived links judged by :mod:`wiki_sim.ingest.entity_links`.
4: ``lead`` NULL when equal to ``text``; memory-mapped title table, forward index and field lengths."""


MMAP_BYTES = 0
"""How much of the store a reader memory-maps: none. Pages are read through SQLite's own cache
(about 2 MB a connection) from the operating system's page cache, which every process shares
either way. Mapped, every page a process had read stayed in its memory figures: a 1M-page
synthesis run's two workers held 564-579 MB each of the store after 150 tasks (2184 MB PSS in
all, against 1006 MB unmapped, the same tasks)."""


class OutdatedStoreError(WikiSimError):
    """The store was written by another version of the schema."""


class StoreWriter:
    """Append pages and redirects to a new store file, then :meth:`finalize` it.

    Pages are buffered and inserted in batches; a page title seen twice keeps its first
    version (dumps occasionally repeat a page).
    """

    def __init__(self, path: str | Path, batch_size: int = 500):
        self.path = Path(path)
        if self.path.exists():
            raise WikiSimError(f"store {self.path} already exists; builds write into a fresh directory")
        import sqlite_utils  # only builds write (it imports pandas: 0.4 s a reader need not pay)

        self.db = sqlite_utils.Database(self.path)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.batch_size = batch_size
        self._pages: list[dict] = []
        self._links: list[dict] = []
        self._facts: list[dict] = []
        self._redirects: list[dict] = []
        self._next_id = 1
        self.db["pages"].create(
            {"id": int, "title": str, "url": str, "lead": str, "text": str, "sections": str}, pk="id"
        )
        self.db["redirects"].create({"alias": str, "target": str}, pk="alias")
        self.db["links"].create({"source": str, "target": str, "anchor": str, "sent_start": int, "sent_end": int,
                                 "resolved": int})
        self.db["facts"].create({"page": str, "key": str, "value": str, "source": str, "target": str})
        self.db["names"].create({"page": str, "name": str, "source": str})
        self._names: list[dict] = []
        self.db["meta"].create({"key": str, "value": str}, pk="key")

    def add_page(self, page: Page) -> None:
        title = canonical_title(page.title)
        self._pages.append({
            "id": self._next_id, "title": title, "url": page.url or title_to_url(title),
            "lead": None if page.lead == page.text else page.lead,
            "text": page.text, "sections": json.dumps(page.sections, ensure_ascii=False),
        })
        self._next_id += 1
        hidden = page.hidden_links
        # Sources give link targets as titles (a wikitext link's #section already dropped).
        links = [(canonical_title(t), a, i in hidden) for i, (t, a) in enumerate(page.links) if t]
        if page.link_starts and len(page.link_starts) == len(page.links):
            starts = [st for (t, _), st in zip(page.links, page.link_starts) if canonical_title(t)]
            spans = locate_spans(page.text, ((st, st + len(a)) if not h else (0, 0)
                                             for (_, a, h), st in zip(links, starts)))
        else:
            spans = locate_anchors(page.text, ("" if h else a for _, a, h in links))
        self._links.extend({"source": title, "target": t, "anchor": a, "sent_start": s, "sent_end": e, "resolved": 0}
                           for (t, a, _), (s, e) in zip(links, spans) if t)
        seen = {title}
        for name, source in page.aliases:
            name = " ".join(name.split())
            if name and name not in seen:
                seen.add(name)
                self._names.append({"page": title, "name": name, "source": source})
        targets = page.fact_targets
        self._facts.extend({"page": title, "key": k, "value": v, "source": s,
                            "target": canonical_title(targets[i]) if i in targets else None}
                           for i, (k, v, s) in enumerate(page.facts))
        if len(self._pages) >= self.batch_size:
            self.flush()

    def add_redirect(self, redirect: Redirect) -> None:
        alias, target = canonical_title(redirect.title), canonical_title(redirect.target)
        if alias and target and alias != target:
            self._redirects.append({"alias": alias, "target": target})

    def add(self, records: Iterable[Page | Redirect]) -> None:
        for record in records:
            if isinstance(record, Page):
                self.add_page(record)
            else:
                self.add_redirect(record)

    def flush(self) -> None:
        if self._pages:
            self.db["pages"].insert_all(self._pages, ignore=True, batch_size=self.batch_size)
        if self._links:
            self.db["links"].insert_all(self._links, batch_size=2000)
        if self._facts:
            self.db["facts"].insert_all(self._facts, batch_size=2000)
        if self._redirects:
            self.db["redirects"].insert_all(self._redirects, ignore=True, batch_size=2000)
        if self._names:
            self.db["names"].insert_all(self._names, batch_size=2000)
        self._pages, self._links, self._facts, self._redirects, self._names = [], [], [], [], []

    def _duplicates_message(self) -> str:
        rows = self.db.execute("SELECT title, COUNT(*) FROM pages GROUP BY title HAVING COUNT(*) > 1 "
                               "ORDER BY MIN(id) LIMIT 4").fetchall()
        total = self.db.execute("SELECT COUNT(*) FROM (SELECT title FROM pages GROUP BY title "
                                "HAVING COUNT(*) > 1)").fetchone()[0]
        shown = ", ".join(f"{title[:80]!r} ({count} pages)" for title, count in rows[:3])
        more = f" and {total - 3} more" if total > 3 else ""
        return (f"the corpus has {total} title(s) used by more than one page: {shown}{more}; titles must be unique "
                "(after normalization: first letter upper case, underscores as spaces). Merge or rename those pages")

    def finalize(self, meta: dict[str, Any]) -> dict[str, int]:
        """Resolve redirects and links, build indexes, write ``meta``; return the counts."""
        self.flush()
        db = self.db
        try:
            db["pages"].create_index(["title"], unique=True, if_not_exists=True)
        except sqlite3.IntegrityError:
            raise WikiSimError(self._duplicates_message()) from None
        db.execute("DELETE FROM redirects WHERE alias IN (SELECT title FROM pages)")
        # Follow redirect chains (A -> B -> C) a few hops, then drop dangling redirects.
        for _ in range(5):
            db.execute(
                "UPDATE redirects SET target = (SELECT r2.target FROM redirects r2 WHERE r2.alias = redirects.target)"
                " WHERE target IN (SELECT alias FROM redirects)"
            )
        db.execute("DELETE FROM redirects WHERE target NOT IN (SELECT title FROM pages)")
        for table in ("links", "facts"):
            db.execute(
                f"UPDATE {table} SET target = (SELECT r.target FROM redirects r WHERE r.alias = {table}.target)"
                " WHERE target IN (SELECT alias FROM redirects)"
            )
        db.execute("UPDATE links SET resolved = 1 WHERE target IN (SELECT title FROM pages)")
        db.execute("UPDATE facts SET target = NULL WHERE target NOT IN (SELECT title FROM pages)")
        db["links"].create_index(["source"], if_not_exists=True)
        db["links"].create_index(["target"], if_not_exists=True)
        db["facts"].create_index(["page"], if_not_exists=True)
        db["redirects"].create_index(["target"], if_not_exists=True)
        db["pages"].create_index(["url"], if_not_exists=True)
        db["names"].create_index(["page"], if_not_exists=True)
        db["names"].create_index(["name"], if_not_exists=True)
        db.execute("ALTER TABLE pages ADD COLUMN inbound_links INTEGER NOT NULL DEFAULT 0")
        db.execute(
            "UPDATE pages SET inbound_links = c.n FROM (SELECT target, COUNT(DISTINCT source) AS n FROM links"
            " WHERE resolved = 1 AND source != target GROUP BY target) AS c WHERE c.target = pages.title")
        counts = {
            "pages": db["pages"].count,
            "redirects": db["redirects"].count,
            "links": db["links"].count,
            "links_resolved": db.execute("SELECT COUNT(*) FROM links WHERE resolved = 1").fetchone()[0],
            "facts": db["facts"].count,
            "facts_with_target": db.execute("SELECT COUNT(*) FROM facts WHERE target IS NOT NULL").fetchone()[0],
            "names": db["names"].count,
        }
        meta = {**meta, "counts": counts, "store_format": STORE_FORMAT}
        db["meta"].insert_all(({"key": k, "value": json.dumps(v, ensure_ascii=False)} for k, v in meta.items()),
                              replace=True)
        db.conn.commit()
        db.execute("ANALYZE")
        db.conn.close()
        return counts


class Store:
    """Read-only access to a built store, safe to share between threads.

    Each thread gets its own SQLite connection (opened read-only on first use).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise WikiSimError(f"no store at {self.path}; build one with `websailor wiki build`")
        self._local = threading.local()
        try:
            found = self.meta().get("store_format", 1)
        except sqlite3.DatabaseError as exc:
            raise WikiSimError(f"{self.path} is not a usable simulator store ({exc}); rebuild it") from None
        if found != STORE_FORMAT:
            raise OutdatedStoreError(
                f"{self.path} has store format {found}, this version of websailor-gym reads format "
                f"{STORE_FORMAT}; rebuild the simulator with `bash setup_wiki.sh` (the default one) or "
                "`websailor wiki build`")

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")  # see MMAP_BYTES
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def meta(self) -> dict[str, Any]:
        return {r["key"]: json.loads(r["value"]) for r in self.conn.execute("SELECT key, value FROM meta")}

    def resolve(self, title: str) -> str | None:
        """The canonical page title for ``title`` or one of its aliases; ``None`` if unknown.

        Tries the exact normalized title, then aliases, then a case-insensitive match; a title
        with ``#`` that names no page is then read as a link target (``Paris#History``).
        """
        found = self._resolve(canonical_title(title))
        if found is None and "#" in title:
            found = self._resolve(normalize_title(title))
        return found

    def _resolve(self, t: str) -> str | None:
        if not t:
            return None
        row = self.conn.execute("SELECT title FROM pages WHERE title = ?", (t,)).fetchone()
        if row:
            return row[0]
        row = self.conn.execute("SELECT target FROM redirects WHERE alias = ?", (t,)).fetchone()
        if row:
            return row[0]
        row = self.conn.execute(
            "SELECT title FROM pages WHERE title = ? COLLATE NOCASE LIMIT 1", (t,)).fetchone()
        if row:
            return row[0]
        row = self.conn.execute(
            "SELECT target FROM redirects WHERE alias = ? COLLATE NOCASE LIMIT 1", (t,)).fetchone()
        return row[0] if row else None

    def page(self, title: str) -> dict[str, Any] | None:
        """``{title, url, lead, text, sections}`` for a title or alias, or ``None``."""
        canonical = self.resolve(title)
        if canonical is None:
            return None
        row = self.conn.execute(
            "SELECT title, url, COALESCE(lead, text) AS lead, text, sections FROM pages WHERE title = ?",
            (canonical,)).fetchone()
        page = dict(row)
        page["sections"] = json.loads(page["sections"])
        return page

    def aliases(self, title: str) -> list[str]:
        """The redirects to a canonical title, sorted."""
        return [r[0] for r in self.conn.execute(
            "SELECT alias FROM redirects WHERE target = ? ORDER BY alias", (title,))]

    def names(self, title: str) -> list[tuple[str, str]]:
        """``(name, source)`` of the other names a canonical title's page gives itself, in page order."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT name, source FROM names WHERE page = ? ORDER BY rowid", (title,))]

    def title_for_url(self, url: str) -> str | None:
        """The title of the page stored under exactly this URL (a document's own URL), else ``None``."""
        row = self.conn.execute("SELECT title FROM pages WHERE url = ? LIMIT 1", (url,)).fetchone()
        return row[0] if row else None

    def links(self, title: str, direction: Literal["out", "in"] = "out") -> list[dict[str, str]]:
        """Links out of (``{target, anchor}``) or into (``{source, anchor}``) a page."""
        canonical = self.resolve(title)
        if canonical is None:
            return []
        if direction == "out":
            sql = "SELECT target, anchor FROM links WHERE source = ?"
        elif direction == "in":
            sql = "SELECT source, anchor FROM links WHERE target = ?"
        else:
            raise ValueError(f"direction must be 'out' or 'in', got {direction!r}")
        return [dict(r) for r in self.conn.execute(sql, (canonical,))]

    def facts(self, title: str) -> list[dict[str, str | None]]:
        """``{key, value, source, target}`` facts of a page (infobox fields, description, ...);
        ``target`` is the page title the value links to, else ``None``."""
        canonical = self.resolve(title)
        if canonical is None:
            return []
        return [dict(r) for r in self.conn.execute(
            "SELECT key, value, source, target FROM facts WHERE page = ? ORDER BY rowid", (canonical,))]

    def iter_facts(self, key: str | None = None) -> Iterator[tuple[str, str, str, str, str | None]]:
        """``(page, key, value, source, target)`` for every fact (of one ``key`` if given), in store order."""
        sql = "SELECT page, key, value, source, target FROM facts"
        rows = self.conn.execute(sql + " WHERE key = ? ORDER BY rowid", (key,)) if key is not None \
            else self.conn.execute(sql + " ORDER BY rowid")
        for r in rows:
            yield tuple(r)  # type: ignore[misc]

    def iter_pages(self) -> Iterator[PageInfo]:
        """Every page, in store order."""
        for r in self.conn.execute("SELECT title, url, length(text), inbound_links FROM pages ORDER BY id"):
            yield PageInfo(r[0], r[1], r[2], r[3])

    def iter_leads(self) -> Iterator[tuple[str, str]]:
        """``(title, lead)`` of every page, in store order."""
        for r in self.conn.execute("SELECT title, COALESCE(lead, text) FROM pages ORDER BY id"):
            yield r[0], r[1] or ""

    def _link_infos(self, sql: str, params: tuple = ()) -> Iterator[LinkInfo]:
        """LinkInfos of link rows ``(source, target, anchor, sent_start, sent_end)`` grouped by source."""
        text_of: tuple[str, str] = ("", "")
        for source, target, anchor, start, end in self.conn.execute(sql, params).fetchall():
            if end > start:
                if text_of[0] != source:
                    row = self.conn.execute("SELECT text FROM pages WHERE title = ?", (source,)).fetchone()
                    text_of = (source, row[0] if row else "")
                sentence = text_of[1][start:end].strip()
            else:
                sentence = ""
            yield LinkInfo(source, target, anchor, sentence)

    def iter_links(self, batch_pages: int = 2000) -> Iterator[LinkInfo]:
        """Every resolved link, grouped by source page in store order (reads a batch of pages at a time)."""
        last_id = 0
        while True:
            ids = [r[0] for r in self.conn.execute(
                "SELECT id FROM pages WHERE id > ? ORDER BY id LIMIT ?", (last_id, batch_pages))]
            if not ids:
                return
            yield from self._link_infos(
                "SELECT l.source, l.target, l.anchor, l.sent_start, l.sent_end FROM pages p"
                " JOIN links l ON l.source = p.title WHERE p.id BETWEEN ? AND ? AND l.resolved = 1"
                " ORDER BY p.id, l.rowid", (ids[0], ids[-1]))
            last_id = ids[-1]

    def page_links(self, title: str, resolved: bool = True) -> list[LinkInfo]:
        """The resolved (or dangling) links out of one page, with their sentences."""
        canonical = self.resolve(title)
        if canonical is None:
            return []
        return list(self._link_infos(
            "SELECT source, target, anchor, sent_start, sent_end FROM links WHERE source = ? AND resolved = ?"
            " ORDER BY rowid", (canonical, int(resolved))))

    def dangling_links(self) -> Iterator[LinkInfo]:
        """Every link to a title that is not a page of the store, grouped by source page."""
        yield from self._link_infos(
            "SELECT l.source, l.target, l.anchor, l.sent_start, l.sent_end FROM links l"
            " JOIN pages p ON p.title = l.source WHERE l.resolved = 0 ORDER BY p.id, l.rowid")

    def titles(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT title FROM pages ORDER BY id")]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]

    def random_titles(self, n: int, seed: int | None = None, min_links: int = 0,
                      min_chars: int = 0) -> list[str]:
        """``n`` distinct page titles drawn uniformly (reproducibly for a seed) among pages
        with at least ``min_links`` outgoing links and ``min_chars`` characters of text."""
        sql = "SELECT p.title FROM pages p"
        params: list[Any] = []
        conds = []
        if min_chars:
            conds.append("length(p.text) >= ?")
            params.append(min_chars)
        if min_links:
            conds.append("(SELECT COUNT(*) FROM links l WHERE l.source = p.title) >= ?")
            params.append(min_links)
        if conds:
            sql += " WHERE " + " AND ".join(conds)
        sql += " ORDER BY p.id"
        pool = [r[0] for r in self.conn.execute(sql, params)]
        rng = random.Random(seed)
        return rng.sample(pool, min(n, len(pool)))
