"""The simulator's SQLite store: pages, redirects, links, facts and build metadata.

Written once per build with sqlite-utils (:class:`StoreWriter`), then opened read-only
(:class:`Store`) by every consumer. Schema:

- ``pages(id, title UNIQUE, url, lead, text, sections JSON)``
- ``redirects(alias PRIMARY KEY, target)``: every alias points at an existing page title
- ``links(source, target, anchor)``: ``target`` resolved through redirects at finalize
- ``facts(page, key, value, source)``
- ``meta(key PRIMARY KEY, value JSON)``: source, counts, versions, build time

Indexed by title, alias, link source, link target, and fact page.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Literal

import sqlite_utils

from wiki_sim.errors import WikiSimError
from wiki_sim.records import Page, Redirect, normalize_title, title_to_url

STORE_FILE = "store.sqlite"


class StoreWriter:
    """Append pages and redirects to a new store file, then :meth:`finalize` it.

    Pages are buffered and inserted in batches; a page title seen twice keeps its first
    version (dumps occasionally repeat a page).
    """

    def __init__(self, path: str | Path, batch_size: int = 500):
        self.path = Path(path)
        if self.path.exists():
            raise WikiSimError(f"store {self.path} already exists; builds write into a fresh directory")
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
        self.db["links"].create({"source": str, "target": str, "anchor": str})
        self.db["facts"].create({"page": str, "key": str, "value": str, "source": str})
        self.db["meta"].create({"key": str, "value": str}, pk="key")

    def add_page(self, page: Page) -> None:
        title = normalize_title(page.title)
        self._pages.append({
            "id": self._next_id, "title": title, "url": title_to_url(title), "lead": page.lead,
            "text": page.text, "sections": json.dumps(page.sections, ensure_ascii=False),
        })
        self._next_id += 1
        self._links.extend({"source": title, "target": normalize_title(t), "anchor": a} for t, a in page.links if t)
        self._facts.extend({"page": title, "key": k, "value": v, "source": s} for k, v, s in page.facts)
        if len(self._pages) >= self.batch_size:
            self.flush()

    def add_redirect(self, redirect: Redirect) -> None:
        alias, target = normalize_title(redirect.title), normalize_title(redirect.target)
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
        self._pages, self._links, self._facts, self._redirects = [], [], [], []

    def finalize(self, meta: dict[str, Any]) -> dict[str, int]:
        """Resolve redirects and links, build indexes, write ``meta``; return the counts."""
        self.flush()
        db = self.db
        # Drop duplicate pages' links/facts (ignored on insert) is unnecessary: duplicates
        # are rare and their links are still true links of that title.
        db["pages"].create_index(["title"], unique=True, if_not_exists=True)
        db.execute("DELETE FROM redirects WHERE alias IN (SELECT title FROM pages)")
        # Follow redirect chains (A -> B -> C) a few hops, then drop dangling redirects.
        for _ in range(5):
            db.execute(
                "UPDATE redirects SET target = (SELECT r2.target FROM redirects r2 WHERE r2.alias = redirects.target)"
                " WHERE target IN (SELECT alias FROM redirects)"
            )
        db.execute("DELETE FROM redirects WHERE target NOT IN (SELECT title FROM pages)")
        db.execute(
            "UPDATE links SET target = (SELECT r.target FROM redirects r WHERE r.alias = links.target)"
            " WHERE target IN (SELECT alias FROM redirects)"
        )
        db["links"].create_index(["source"], if_not_exists=True)
        db["links"].create_index(["target"], if_not_exists=True)
        db["facts"].create_index(["page"], if_not_exists=True)
        db["redirects"].create_index(["target"], if_not_exists=True)
        counts = {
            "pages": db["pages"].count,
            "redirects": db["redirects"].count,
            "links": db["links"].count,
            "links_resolved": db.execute(
                "SELECT COUNT(*) FROM links WHERE target IN (SELECT title FROM pages)").fetchone()[0],
            "facts": db["facts"].count,
        }
        meta = {**meta, "counts": counts}
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
            self.meta()
        except sqlite3.DatabaseError as exc:
            raise WikiSimError(f"{self.path} is not a usable simulator store ({exc}); rebuild it") from None

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def meta(self) -> dict[str, Any]:
        return {r["key"]: json.loads(r["value"]) for r in self.conn.execute("SELECT key, value FROM meta")}

    def resolve(self, title: str) -> str | None:
        """The canonical page title for ``title`` or one of its aliases; ``None`` if unknown.

        Tries the exact normalized title, then aliases, then a case-insensitive match.
        """
        t = normalize_title(title)
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
            "SELECT title, url, lead, text, sections FROM pages WHERE title = ?", (canonical,)).fetchone()
        page = dict(row)
        page["sections"] = json.loads(page["sections"])
        return page

    def aliases(self, title: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT alias FROM redirects WHERE target = ? ORDER BY alias", (title,))]

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

    def facts(self, title: str) -> list[dict[str, str]]:
        """``{key, value, source}`` facts of a page (infobox fields, description, ...)."""
        canonical = self.resolve(title)
        if canonical is None:
            return []
        return [dict(r) for r in self.conn.execute(
            "SELECT key, value, source FROM facts WHERE page = ? ORDER BY rowid", (canonical,))]

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
