"""The reply cache: requests-cache over SQLite (WAL), shared by every process on a machine.

Only successful replies (HTTP 200) are stored, keyed by method, URL and body (POST bodies
included, so two Serper queries are two entries) and never by an API key: every spelling
of every key-bearing header and parameter is in ``ignored_parameters``, which requests-cache
both drops from the key and redacts from the stored request. requests-cache compares those
names case-sensitively, so a header sent as ``x-api-key`` would slip past a list holding
only ``X-API-KEY``; :func:`envs.live.redact.key_name_variants` lists every spelling, and a
serializer stage scrubs any registered key from the whole record before it is written, so
a key echoed in a body or a URL does not reach the file either.
"""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

from requests_cache import CachedSession, SQLiteCache
from requests_cache.serializers import SerializerPipeline, Stage
from requests_cache.serializers.preconf import base_stage

from envs.live.redact import key_name_variants, scrub_value

IGNORED_PARAMETERS = tuple(key_name_variants())
BUSY_TIMEOUT_MS = 30_000


def scrubbing_serializer() -> SerializerPipeline:
    """Pickle, with every registered secret removed from the unstructured record first."""
    return SerializerPipeline([base_stage, Stage(dumps=scrub_value, loads=lambda x: x), Stage(pickle)],
                              name="websailor-scrubbed-pickle", is_binary=True)


def open_cache(path: str | Path) -> SQLiteCache:
    """The SQLite backend at ``path`` (created with its folder if missing), in WAL mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return SQLiteCache(str(path), wal=True, busy_timeout=BUSY_TIMEOUT_MS, serializer=scrubbing_serializer())
    except sqlite3.DatabaseError as e:
        raise ValueError(f"live cache {path}: cannot open the SQLite database: {e}") from None


def cached_session(backend: SQLiteCache) -> CachedSession:
    """A session over ``backend`` that caches GET and POST 200s, ignoring server cache
    headers (expiry is ours, per source) and never matching on request headers."""
    return CachedSession(backend=backend, allowable_methods=("GET", "POST"), allowable_codes=(200,),
                         ignored_parameters=IGNORED_PARAMETERS, match_headers=False, cache_control=False,
                         expire_after=-1, stale_if_error=False)


def integrity_check(path: str | Path) -> str:
    """``PRAGMA integrity_check`` of the cache database (``'ok'`` when healthy)."""
    with sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000) as con:
        return "; ".join(row[0] for row in con.execute("PRAGMA integrity_check"))


def cache_files(path: str | Path) -> list[Path]:
    """The database file and its WAL and shared-memory companions that exist."""
    path = Path(path)
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]
