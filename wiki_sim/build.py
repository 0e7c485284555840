"""Atomic simulator builds: corpus -> store -> index -> build.json, then swapped into place.

Everything is written into a temporary directory beside ``out`` (``.NAME.building-PID-*``);
``build.json``, whose presence marks a complete simulator, is written last; then the old
simulator (if any) is renamed aside, the new one renamed in, and the old one deleted. Any
error or interrupt removes the temporary directory and leaves an existing simulator at
``out`` untouched. A build killed outright (SIGKILL, power loss) leaves its temporary
directory behind; the next build removes it (and puts back an old simulator caught
between the two renames).

A rebuild deletes the old folder, so ``build.json`` lists every file the build wrote
(``files``) and :func:`check_out_dir` walks the whole tree: a file it does not list (a user's
notes inside ``index/``) makes the build refuse ``out`` before it starts.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import platform
import re
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from wiki_sim.common.jsonl import write_json_atomic
from wiki_sim.errors import WikiSimError
from wiki_sim.forward import FORWARD_DIR, build_forward_index
from wiki_sim.forked import Forked
from wiki_sim.engines import BUILD_ENGINES, build_engine_index, check_engine, choose_engine, index_dir_name
from wiki_sim.budget import (PeakMemory, check_budget, peak_resident_bytes, release_free_memory,
                             resident_bytes)
from wiki_sim.index import ALIASES_BOOST, INDEX_DIR, TITLE_BOOST
from wiki_sim.records import Page
from wiki_sim.sim import BUILD_FILE, BUILD_FORMAT
from wiki_sim.spelling import SPELLING_DIR, SPELLING_FILES
from wiki_sim.store import STORE_FILE, StoreWriter

FORWARD_MIN_BYTES = 32 * 2 ** 20
"""The least the forward index's process may be given: its interpreter's own pages come from
the fork (shared), its term ids and vocabulary are new."""
FORWARD_PROCESS_BYTES = 16 * 2 ** 20
"""What the forward index's process holds beside its term ids (the vocabulary, the SQLite reader)."""
DEFAULT_MEMORY_MB = 1024
"""A build's default memory budget, above what the building process holds when it starts."""
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>building|old)-(?P<pid>\d+)-[^/]*$")


def build(kind: str, path: str | Path | None = None, out: str | Path = "data/wiki", *, workers: int = 2,
          page_timeout: float = 10.0, progress: bool = True, cache_dir: str | Path | None = None,
          reuse: bool = False, engine: str = "whoosh", fields: Any = None,
          memory_mb: int | None = None) -> dict[str, Any]:
    """Build a simulator from a corpus into ``out`` atomically; return its build.json content.

    ``reuse``: if ``out`` already holds a complete simulator built from the same source
    (same sha256, or same path, size and modification time) by this package version,
    keep it and return its build.json (with ``"reused": true``).
    ``engine``: the search index, ``whoosh`` (default), ``tantivy`` or ``auto`` (tantivy above
    :data:`wiki_sim.engines.AUTO_TANTIVY_PAGES` pages); build.json records the one built.
    ``fields``: for ``jsonl``, a :class:`~wiki_sim.ingest.jsonl.JsonlFields` naming the fields.
    ``memory_mb``: the memory budget of the build's whole process tree (this process and its
    index writers); ``None``: :data:`DEFAULT_MEMORY_MB` above what this process holds when
    the build starts (a build called from a large process is not refused). Running out of
    it, or of disk, raises a one-line :class:`WikiSimError` and leaves ``out`` as it was.
    """
    from wiki_sim.ingest import open_source

    check_engine(engine, BUILD_ENGINES)
    if engine == "tantivy":
        from wiki_sim.tantivy_index import import_tantivy

        import_tantivy()  # fail before parsing the corpus, not after
    out = Path(out).expanduser().absolute()
    check_out_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(out)
    source = open_source(kind, path, workers=workers, page_timeout=page_timeout, progress=progress,
                         cache_dir=cache_dir, fields=fields)
    fingerprint = source_fingerprint(source.meta)
    if reuse:
        current = _current_build(out)
        if current and current.get("source_fingerprint") == fingerprint and current.get("format") == BUILD_FORMAT \
                and current.get("versions", {}).get("websailor-gym") == _package_version() \
                and (current.get("index") or {}).get("engine", "whoosh") \
                == choose_engine(engine, int((current.get("counts") or {}).get("pages", 0))):
            return {**current, "reused": True}
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-{os.getpid()}-", dir=out.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the simulator is not
        budget = memory_mb * 2 ** 20 if memory_mb is not None else resident_bytes() + DEFAULT_MEMORY_MB * 2 ** 20
        memory_mb = budget // 2 ** 20
        with PeakMemory() as peak:
            info = _build_into(tmp, source, fingerprint, workers, progress, engine, budget)
        info["peak_rss_mb"] = peak.peak // 2 ** 20  # the build's processes together, at their largest
        info["files"] = sorted({*_tree_files(tmp), BUILD_FILE})
        _write_json(tmp / BUILD_FILE, info)
        swap_into_place(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        message = resource_error(exc, out, memory_mb)
        if message:
            raise WikiSimError(message) from None
        raise
    return info


def resource_error(exc: BaseException, out: Path, memory_mb: int) -> str | None:
    """The one-line message for a build that ran out of memory or disk, else ``None``."""
    kept = f"the simulator at {out} is unchanged" if (out / BUILD_FILE).is_file() else f"nothing was written to {out}"
    text = str(exc)
    if "out of memory budget" in text:
        return f"the build ran {text}; {kept}"
    if isinstance(exc, MemoryError) or "out of memory" in text:
        return (f"the build ran out of memory (budget --memory-mb {memory_mb}); {kept}. Free memory, or lower "
                "--memory-mb (smaller index segments) or --workers")
    full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) \
        or (isinstance(exc, sqlite3.OperationalError) and "disk is full" in text) \
        or "no space left on device" in text.lower()
    if full:
        return (f"the build ran out of disk space in {out.parent}; {kept}. Free space there or build with --out on "
                "a larger disk (a build needs about 2x the finished simulator while it runs)")
    return None


def _build_into(tmp: Path, source: Any, fingerprint: dict[str, Any], workers: int, progress: bool,
                engine: str = "whoosh", memory_bytes: int = DEFAULT_MEMORY_MB * 2 ** 20) -> dict[str, Any]:
    start = time.perf_counter()
    writer = StoreWriter(tmp / STORE_FILE)
    try:
        for record in source:
            if isinstance(record, Page):
                writer.add_page(record)
            else:
                writer.add_redirect(record)
        parsed = time.perf_counter()
        stats = dict(source.stats)
        meta = {"source": source.meta, "source_fingerprint": fingerprint, "versions": versions()}
        counts = writer.finalize(meta)
    except BaseException:
        writer.db.conn.close()
        raise
    stored = time.perf_counter()
    ingest_peak = peak_resident_bytes()  # the corpus read, links derived, store written: this process alone
    if counts["pages"] == 0:
        raise WikiSimError(f"the corpus {source.meta.get('path', '')} has no pages")
    engine = choose_engine(engine, counts["pages"])  # --engine auto, and each engine's size limit
    # The forward index (one process's work) is built in a forked process while the engine indexes:
    # a quarter of what the budget leaves is its share, the rest the engine's.
    release_free_memory()  # the ingest's freed heap, before the forward index's process forks
    forward_bytes = check_budget(memory_bytes, FORWARD_MIN_BYTES, "the forward index") // 4
    forward_job = Forked(build_forward_index, tmp / STORE_FILE, tmp / FORWARD_DIR,
                         memory_bytes=max(forward_bytes - FORWARD_PROCESS_BYTES, 0), what="the forward index")
    try:
        index = build_engine_index(engine, tmp / STORE_FILE, tmp, workers=workers, progress=progress,
                                   memory_bytes=memory_bytes - forward_bytes)
        indexed = time.perf_counter()
        forward = forward_job.result()
    finally:
        forward_job.stop()
    done = time.perf_counter()
    skipped_titles = stats.pop("skipped_titles", [])
    return {
        "format": BUILD_FORMAT,
        "source": source.meta,
        "source_fingerprint": fingerprint,
        "counts": {**counts, "documents_indexed": index["documents"], "index_segments": index["segments"],
                   "forward_terms": forward["terms"]},
        "links": {**source.meta.get("links", {"derived": False, "method": "wikilinks"}),
                  "count": counts["links"], "resolved": counts["links_resolved"]},
        "skipped": {"count": stats.get("skipped", 0), "titles": skipped_titles},
        "source_stats": stats,
        "index": {**_index_info(engine), **{k: index[k] for k in ("score_table",) if k in index}},
        "workers": workers,
        "memory_mb": memory_bytes // 2 ** 20,
        "ingest_peak_rss_mb": ingest_peak // 2 ** 20,
        "versions": versions(),
        "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "forward_index_concurrent": True,  # built beside the index: the durations overlap
        "durations_s": {
            "parse_and_store": round(parsed - start, 3),
            "finalize_store": round(stored - parsed, 3),
            "index": round(indexed - stored, 3),
            "forward_index": forward_job.seconds,
            "total": round(done - start, 3),
        },
    }


def _index_info(engine: str) -> dict[str, Any]:
    analyzer = "words, lower case, English stopwords removed, Porter stems"
    if engine == "tantivy":
        from wiki_sim.tantivy_index import TITLE_REPEATS

        return {"engine": engine, "dir": index_dir_name(engine), "scoring": "BM25",
                "title_repeats": TITLE_REPEATS, "analyzer": analyzer}
    return {"engine": engine, "dir": index_dir_name(engine), "scoring": "BM25F",
            "field_boosts": {"title": TITLE_BOOST, "aliases": ALIASES_BOOST, "body": 1.0}, "analyzer": analyzer}


SYNTH_INDEX_DIR = "synth_index"
"""Written into a simulator after its build by synthesis (sailorfog.corpus_index.INDEX_DIR), with
its own ``meta.json``."""
_SQLITE_SIDE_FILES = (f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal")
VECTORS_DIR = "vectors"
"""The dense index (:mod:`wiki_sim.dense`), written by ``websailor wiki embed`` or ``wiki build --retriever``."""
LATER_DIRS = (SPELLING_DIR, SYNTH_INDEX_DIR, VECTORS_DIR)
"""Folders written into a simulator after its build, each completed by a ``meta.json`` written last."""


def _tree_files(root: Path) -> list[str]:
    """Every entry under ``root`` that is not a real directory (files, links, others), as
    relative POSIX paths; symbolic links are listed, never followed."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel = Path(folder).relative_to(root)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            found.append((rel / name).as_posix())
    return found


def _unlisted_files(out: Path, info: dict[str, Any]) -> list[str]:
    """Files under ``out`` that no record of this project accounts for: the build's list, or,
    in a folder written after the build (:data:`LATER_DIRS`), that folder's ``meta.json``,
    written last, which no file of the folder's writer postdates. A build record without a
    file list is checked the same way against ``build.json``, which the build wrote last; a
    spelling folder without ``meta.json`` may hold only the spelling writer's file names."""
    listed = info.get("files")
    listed = set(listed) if isinstance(listed, list) else None
    stamps: dict[Path, float | None] = {}

    def stamp(record: Path) -> float | None:
        if record not in stamps:
            stamps[record] = record.lstat().st_mtime if record.is_file() and not record.is_symlink() else None
        return stamps[record]

    foreign = []
    for rel in _tree_files(out):
        if rel in _SQLITE_SIDE_FILES or (listed is not None and rel in listed) or (listed is None and "/" not in rel):
            continue  # (top-level names are checked by name, :func:`check_out_dir`)
        top = rel.split("/", 1)[0]
        record = out / top / "meta.json" if top in LATER_DIRS else (out / BUILD_FILE if listed is None else None)
        limit = stamp(record) if record is not None and "/" in rel else None
        path = out / rel
        if limit is None and top == SPELLING_DIR and rel[len(top) + 1:] in SPELLING_FILES:
            limit = float("inf")
        if limit is None or path.is_symlink() or not path.is_file() or path.lstat().st_mtime > limit:
            foreign.append(rel)
    return sorted(foreign)


def _simulator_entries() -> set[str]:
    """What a simulator directory holds: its build record, store (with SQLite's side files),
    search index (either engine) and forward index."""
    return {BUILD_FILE, STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal", INDEX_DIR,
            index_dir_name("tantivy"), FORWARD_DIR, SPELLING_DIR, SYNTH_INDEX_DIR, VECTORS_DIR}


def is_simulator_record(path: Path) -> bool:
    """True when ``path`` (a ``build.json``) is the build record of a simulator of this project:
    a JSON object with a ``format`` and the ``websailor-gym`` version that built it."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 16 * 1024 * 1024:
            return False
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    versions = info.get("versions") if isinstance(info, dict) else None
    return isinstance(versions, dict) and "websailor-gym" in versions and "format" in info


def check_out_dir(out: Path) -> None:
    """Refuse an ``out`` that exists and is not a simulator of this project.

    Only an empty directory, or one whose ``build.json`` is this project's build record and
    which holds nothing but what that build wrote (the whole tree, :func:`_unlisted_files`), may
    be replaced: an entry that merely has a simulator's name (``index/``, ``store.sqlite``)
    proves nothing, and a replacement deletes everything in the folder."""
    if not (out.exists() or out.is_symlink()):
        return
    if out.is_symlink() or not out.is_dir():
        raise WikiSimError(f"--out {out} exists and is not a directory")
    entries = {p.name for p in out.iterdir()}
    if not entries:
        return
    if not is_simulator_record(out / BUILD_FILE):
        raise WikiSimError(f"--out {out} is a non-empty directory that is not a simulator (no {BUILD_FILE} written "
                           "by websailor-gym); refusing to replace it (choose another --out or remove it)")
    foreign = sorted(entries - _simulator_entries())
    if not foreign:
        foreign = _unlisted_files(out, json.loads((out / BUILD_FILE).read_text(encoding="utf-8")))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise WikiSimError(f"--out {out} is a simulator but also holds {shown}, which a rebuild would delete; "
                           "move them out or choose another --out")


def swap_into_place(new: Path, out: Path) -> None:
    """Rename ``new`` to ``out``; an existing ``out`` is renamed aside first, then deleted."""
    if not (out.exists() or out.is_symlink()):
        os.rename(new, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-{os.getpid()}-", dir=out.parent))
    os.rmdir(old)  # only the unique name was wanted
    os.rename(out, old)
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers(out: Path) -> list[str]:
    """Remove what killed builds of ``out`` left beside it; return the removed names.

    Temporary directories of builds whose process is still alive are left alone. If
    ``out`` is missing but a complete old simulator was left renamed aside (the build died
    between the two renames of the swap), it is put back first.
    """
    removed = []
    if not out.parent.is_dir():
        return removed
    for entry in sorted(out.parent.iterdir()):
        m = _LEFTOVER.match(entry.name)
        if not m or m["name"] != out.name or _alive(int(m["pid"])):
            continue
        if m["kind"] == "old" and not out.exists() and (entry / BUILD_FILE).is_file():
            os.rename(entry, out)
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed


def source_fingerprint(meta: dict[str, Any]) -> dict[str, Any]:
    """What identifies a build's input: its sha256 where known, else path, size and mtime."""
    if meta.get("sha256"):
        return {"kind": meta.get("kind"), "sha256": meta["sha256"]}
    path = meta.get("path")
    fp: dict[str, Any] = {"kind": meta.get("kind"), "path": path}
    if meta.get("fields"):
        fp["fields"] = meta["fields"]
    if path and os.path.exists(path):
        st = os.stat(path)
        fp.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
    return fp


def _current_build(out: Path) -> dict[str, Any] | None:
    try:
        info = json.loads((out / BUILD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("websailor-gym")
    except metadata.PackageNotFoundError:
        return "unknown"


def versions() -> dict[str, str]:
    import mwparserfromhell
    import whoosh

    return {
        "python": platform.python_version(),
        "whoosh": whoosh.versionstring(),
        "mwparserfromhell": mwparserfromhell.__version__,
        "sqlite": sqlite3.sqlite_version,
        "websailor-gym": _package_version(),
    }


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_json_atomic(path, data, indent=2, ensure_ascii=False)
