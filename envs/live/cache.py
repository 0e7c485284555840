"""The reply cache: requests-cache over SQLite (WAL), shared by every process on a machine.

Only successful replies (HTTP 200) are stored, keyed by method, URL and body (POST bodies
included, so two Serper queries are two entries) and never by an API key: every spelling
of every key-bearing header and parameter is in ``ignored_parameters``, which requests-cache
both drops from the key and redacts from the stored request. requests-cache compares those
names case-sensitively, so a header sent as ``x-api-key`` would slip past a list holding
only ``X-API-KEY``; :func:`envs.live.redact.key_name_variants` lists every spelling, and a
serializer stage scrubs any registered key from the whole record before it is written, so
a key echoed in a body or a URL does not reach the file either.

One failed write must not freeze the database for every process on the machine:
requests-cache rolls a write transaction back only on ``sqlite3.OperationalError``, so any
other error (``DataError`` for a blob SQLite refuses) left ``BEGIN IMMEDIATE`` open and every
other writer spinning forever. :class:`SafeSQLiteCache` rolls back on any error, waits a
bounded time for the write lock, and treats a failed write as "not cached" (the reply is
still answered). Bodies are capped before they get here (``max_page_bytes``), and anything
over ``max_body_bytes`` is not written at all.

The database is shared between processes and users, so a record is data, never a pickle:
JSON with bytes as UTF-8 text or base64 (:func:`scrubbing_serializer`). A row this serializer did not write
(a pickle, another format, garbled or deeply nested JSON) reads as a miss and is fetched again.
"""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from requests_cache import CachedSession, SQLiteCache
from requests_cache.backends.sqlite import SQLiteDict
from requests_cache.serializers import SerializerPipeline, Stage
from requests_cache.serializers.preconf import base_stage

from envs.live.redact import key_name_variants, scrub_value

IGNORED_PARAMETERS = tuple(key_name_variants())
BUSY_TIMEOUT_MS = 30_000
LOCK_WAIT_S = 30.0
log = logging.getLogger("envs.live")


RECORD_FORMAT = "websailor-reply-json-1"
"""Tag of every record :func:`scrubbing_serializer` writes; any other row is not read."""
_BYTES, _UTF8 = "$b64", "$utf8"


def _tagged(value: Any) -> Any:
    """``value`` with every ``bytes`` as ``{"$utf8": text}`` or, when not UTF-8,
    ``{"$b64": base64}`` (JSON has no bytes; text stays readable in the file)."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return {_UTF8: bytes(value).decode("utf-8")}
        except UnicodeDecodeError:
            return {_BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _tagged(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    return value


def _untagged(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES in value:
            return base64.b64decode(value[_BYTES], validate=True)
        if len(value) == 1 and _UTF8 in value:
            return value[_UTF8].encode("utf-8")
        return {k: _untagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untagged(v) for v in value]
    return value


def _record_dumps(record: dict) -> bytes:
    return json.dumps({"format": RECORD_FORMAT, "reply": _tagged(record)}, separators=(",", ":")).encode()


def _record_loads(blob: Any) -> dict:
    if not isinstance(blob, (bytes, str)) or not (blob[:1] in (b"{", "{")):
        raise ValueError("not a JSON record")
    data = json.loads(blob)
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT or not isinstance(data.get("reply"), dict):
        raise ValueError(f"not a {RECORD_FORMAT} record")
    return _untagged(data["reply"])


class DataSerializer(SerializerPipeline):
    """A pipeline whose ``loads`` fails only with ``ValueError`` (which requests-cache reads
    as a miss), whatever a foreign row holds."""

    def loads(self, value: Any) -> Any:
        try:
            return super().loads(value)
        except Exception as exc:  # noqa: BLE001 - JSON, base64, cattrs or recursion errors alike
            raise ValueError(f"live cache: a row this cache did not write ({type(exc).__name__})") from None


def scrubbing_serializer() -> SerializerPipeline:
    """JSON records (bytes as text or base64), with every registered secret removed from the
    unstructured record first; reading one never runs code."""
    return DataSerializer([base_stage, Stage(dumps=scrub_value, loads=lambda x: x),
                           Stage(dumps=_record_dumps, loads=_record_loads)],
                          name=RECORD_FORMAT, is_binary=True)


class SafeSQLiteDict(SQLiteDict):
    """requests-cache's table, with a write transaction that always ends (see the module
    docstring)."""

    lock_wait_s = LOCK_WAIT_S

    @contextmanager
    def _acquire_sqlite_lock(self):
        with self._lock:
            give_up = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    self._connection.execute("BEGIN IMMEDIATE")
                    self._active_transaction = True
                    break
                except sqlite3.OperationalError:
                    if time.monotonic() >= give_up:
                        raise
                    time.sleep(0.001)
            try:
                yield
                self._connection.commit()
            except BaseException:
                try:
                    self._connection.rollback()
                except sqlite3.Error:
                    pass
                raise
            finally:
                self._active_transaction = False


class SafeSQLiteCache(SQLiteCache):
    """The SQLite backend with :class:`SafeSQLiteDict` tables; a write that fails is logged
    and skipped, and a body over ``max_body_bytes`` is never written."""

    def __init__(self, db_path: str, *, max_body_bytes: int | None = None, **kwargs):
        super().__init__(db_path, **kwargs)
        self.responses.__class__ = SafeSQLiteDict  # same state, safer transaction
        self.redirects.__class__ = SafeSQLiteDict
        self.max_body_bytes = max_body_bytes

    def save_response(self, response, cache_key=None, expires=None):
        content = getattr(response, "_content", None)
        if self.max_body_bytes is not None and isinstance(content, bytes) and len(content) > self.max_body_bytes:
            return
        try:
            super().save_response(response, cache_key, expires)
        except sqlite3.Error as e:
            log.warning("live cache: a write failed and was rolled back; the reply is not cached (%s: %s)",
                        type(e).__name__, e)


def open_cache(path: str | Path, max_body_bytes: int | None = None) -> SafeSQLiteCache:
    """The SQLite backend at ``path`` (created with its folder if missing), in WAL mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return SafeSQLiteCache(str(path), max_body_bytes=max_body_bytes, wal=True, busy_timeout=BUSY_TIMEOUT_MS,
                               serializer=scrubbing_serializer())
    except sqlite3.DatabaseError as e:
        raise ValueError(f"live cache {path}: cannot open the SQLite database: {e}") from None


def cached_session(backend: SafeSQLiteCache) -> CachedSession:
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
