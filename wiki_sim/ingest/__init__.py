"""Ingestion: every corpus as one stream of :class:`~wiki_sim.records.Page` / :class:`~wiki_sim.records.Redirect`.

``open_source(kind, path)`` checks its input up front (missing file, not a MediaWiki
export, not bzip2, ...) and returns a :class:`Source`: iterate it for the records (a
dump is streamed in constant memory and parsed in worker processes), read ``meta``
before and ``stats`` after. Bad input raises :class:`~wiki_sim.errors.WikiSimError` with a
one-line message, at ``open_source`` when it can be seen at once, else from the iterator.

Kinds:

- ``default``: the embedded Vital Articles corpus (fetched at setup, see :mod:`wiki_sim.sources`);
  ``path`` may name another copy of ``summaries_en-us.json``;
- ``dump``: a MediaWiki XML export (``.xml``, ``.xml.bz2``, ``.xml.gz``) at ``path``;
- ``jsonl``: one document per line at ``path``: ``{"title", "text"}``, wiki-18 ``{"id", "contents"}``,
  or any shape whose fields ``fields`` (:class:`~wiki_sim.ingest.jsonl.JsonlFields`) names;
- ``gensim-sample``: the enwiki sample from the gensim wheel (fetched at setup; 206 XML pages, 106 articles).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, get_args

import mwparserfromhell

from wiki_sim import sources
from wiki_sim.errors import WikiSimError
from wiki_sim.records import Page, Redirect

SourceKind = Literal["default", "dump", "jsonl", "gensim-sample"]
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)


def fresh_stats() -> dict[str, Any]:
    return {"pages": 0, "redirects": 0, "skipped": 0, "skipped_titles": [], "non_main_namespace": 0,
            "empty": 0, "links": 0, "facts": 0, "lines": 0, "passages_merged": 0, "worker_restarts": 0,
            "duplicates_skipped": 0, "duplicate_titles": 0}


class Source:
    """An iterable of Page | Redirect records with ``meta`` (known before) and ``stats`` (filled during).

    Each iteration starts over (and resets ``stats``).
    """

    def __init__(self, kind: SourceKind, path: Path, meta: dict[str, Any],
                 records: Callable[[dict[str, Any]], Iterator[Page | Redirect]]):
        self.kind = kind
        self.path = path
        self.meta = meta
        self.stats: dict[str, Any] = fresh_stats()
        self._records = records

    def __iter__(self) -> Iterator[Page | Redirect]:
        self.stats.clear()
        self.stats.update(fresh_stats())
        return self._records(self.stats)

    def __repr__(self) -> str:
        return f"Source(kind={self.kind!r}, path={str(self.path)!r})"


def open_source(kind: SourceKind, path: str | Path | None = None, *, workers: int = 2, page_timeout: float = 10.0,
                progress: bool = True, cache_dir: str | Path | None = None, _parser: str | None = None,
                _hard_grace: float | None = None, fields: Any = None) -> Source:
    """Open a corpus for ingestion; see the module docstring for the kinds.

    ``workers``: parser processes for dumps, link-finding processes for ``jsonl``;
    ``page_timeout``: seconds one page may take to parse before it is skipped. ``fields``: a :class:`~wiki_sim.ingest.jsonl.JsonlFields` for
    ``jsonl`` (which fields hold the title, text, URL and id). ``_parser`` (``'module:function'``) and ``_hard_grace``
    (seconds past the limit before a stuck worker is killed) are test hooks.
    """
    if kind not in SOURCE_KINDS:
        raise WikiSimError(f"unknown source kind {kind!r}; expected one of {', '.join(SOURCE_KINDS)}")
    if not isinstance(workers, int) or workers < 1:
        raise WikiSimError(f"workers must be an integer >= 1, got {workers!r}")
    if not page_timeout > 0:
        raise WikiSimError(f"page_timeout must be > 0 seconds, got {page_timeout!r}")
    meta: dict[str, Any] = {"kind": kind, "python": platform.python_version()}
    # Corpora without wikilinks get links found in their text (wiki_sim.ingest.entity_links).
    meta["links"] = ({"derived": True, "method": "entity_links"} if kind in ("default", "jsonl")
                     else {"derived": False, "method": "wikilinks"})
    if kind == "default":
        if path is None:
            file, meta["sha256"] = sources.fetch_default_corpus(cache_dir), sources.DEFAULT_CORPUS.sha256
            meta["corpus"] = sources.DEFAULT_CORPUS.requirement
        else:
            file = _existing(path, kind)
        return _source(kind, file, meta, _default_records(file))
    if kind == "gensim-sample":
        if path is not None:
            raise WikiSimError("the gensim-sample source takes no PATH (use --source dump PATH for a dump)")
        file, meta["sha256"] = sources.fetch_gensim_sample(cache_dir), sources.GENSIM_SAMPLE.sha256
        meta["corpus"] = sources.GENSIM_SAMPLE.requirement
    else:
        if path is None:
            raise WikiSimError(f"the {kind} source needs a PATH")
        file = _existing(path, kind)
    if kind == "jsonl":
        from wiki_sim.ingest.jsonl import JsonlFields

        fields = fields or JsonlFields()
        named = {k: v for k, v in vars(fields).items() if v is not None}
        if named:
            meta["fields"] = named
        return _source(kind, file, meta, _jsonl_records(file, progress, fields, workers))
    if fields is not None:
        raise WikiSimError(f"field names (--title-field, ...) apply to --source jsonl only, not {kind}")
    return _dump_source(kind, file, meta, workers, page_timeout, progress, _parser, _hard_grace)


def _existing(path: str | Path, kind: str) -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise WikiSimError(f"{kind} source {file} does not exist or is not a file")
    return file


def _source(kind: SourceKind, file: Path, meta: dict[str, Any],
            records: Callable[[dict[str, Any]], Iterator[Page | Redirect]]) -> Source:
    meta.update(path=str(file), size_bytes=file.stat().st_size)
    return Source(kind, file, meta, records)


def _default_records(file: Path) -> Callable[[dict[str, Any]], Iterator[Page | Redirect]]:
    from wiki_sim.ingest.default_corpus import iter_default_corpus

    return lambda stats: iter_default_corpus(file, stats)


def _jsonl_records(file: Path, progress: bool, fields: Any,
                   workers: int) -> Callable[[dict[str, Any]], Iterator[Page | Redirect]]:
    from wiki_sim.ingest.jsonl import iter_jsonl

    return lambda stats: iter_jsonl(file, stats, progress, fields, workers)


def _dump_source(kind: SourceKind, file: Path, meta: dict[str, Any], workers: int, page_timeout: float,
                 progress: bool, parser: str | None, hard_grace: float | None) -> Source:
    from wiki_sim.ingest.pool import DEFAULT_PARSER
    from wiki_sim.ingest.xml_dump import DumpReader, check_dump

    check_dump(file)
    meta.update(parser={"mwparserfromhell": mwparserfromhell.__version__,
                        "c_tokenizer": bool(mwparserfromhell.parser.use_c)},
                workers=workers, page_timeout=page_timeout)

    def records(stats: dict[str, Any]) -> Iterator[Page | Redirect]:
        return iter(DumpReader(file, workers=workers, page_timeout=page_timeout, progress=progress, stats=stats,
                               parser=parser or DEFAULT_PARSER, hard_grace=hard_grace))

    return _source(kind, file, meta, records)


__all__ = ["SourceKind", "SOURCE_KINDS", "Source", "open_source", "fresh_stats"]
