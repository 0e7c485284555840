"""JSONL reading with errors that name the file and line, and the one family of atomic writers.

Readers: :func:`iter_jsonl` (``(line number, value)`` for each non-blank line) and
:func:`read_jsonl` (the values as a list). A line that is not UTF-8 or not JSON raises
:class:`~wiki_sim.common.errors.UserError` naming ``path:line``.

Writers: a file that has its final name is complete. Each writer writes ``<name>.tmp`` in the
same folder (so the rename stays on one filesystem), flushes and fsyncs it, then renames it over
the target with ``os.replace``; on any error (an interrupt included) the temporary file is
removed and the target is left as it was. One writer per target at a time: two writers of the
same path share the temporary name. Parent folders are not created.

- :func:`atomic_open`: a file object for streaming writers (``json.dump``, ``torch.save``, a plot);
- :func:`atomic_write_text`, :func:`atomic_write_bytes`: a whole text or byte string;
- :func:`write_json_atomic`: one JSON value and a newline;
- :func:`write_jsonl_atomic`: one JSON value per line; returns the count.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

from wiki_sim.common.errors import UserError

TMP_SUFFIX = ".tmp"
"""The temporary file of ``path`` is ``path`` with this appended (``run.json`` -> ``run.json.tmp``)."""


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for each non-blank line; :class:`UserError` naming
    ``path:line`` on the first line that is not UTF-8 or not valid JSON (nesting too deep for
    the decoder included)."""
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"{path}:{lineno}: not valid UTF-8 (byte {exc.start + 1} of the line: "
                                f"{raw[exc.start:exc.start + 1]!r}); save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise UserError(f"{path}:{lineno}: JSON nested too deeply to read (more than about "
                                f"{sys.getrecursionlimit()} levels of arrays or objects)") from None


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every value of a JSONL file, in order (blank lines skipped); errors as :func:`iter_jsonl`."""
    return [value for _, value in iter_jsonl(path)]


def tmp_path(path: str | os.PathLike) -> Path:
    """The temporary file the atomic writers use for ``path``."""
    path = Path(path)
    return path.with_name(path.name + TMP_SUFFIX)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                errors: str | None = None) -> Iterator[IO[Any]]:
    """A file to write ``path`` through: ``mode`` ``"w"`` (text, ``encoding``/``errors`` as ``open``)
    or ``"wb"``. When the block ends normally the file is fsynced and renamed to ``path``; when it
    raises, the temporary file is removed and the exception goes on."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    tmp = tmp_path(path)
    text = {} if mode == "wb" else {"encoding": encoding, "errors": errors}
    try:
        with open(tmp, mode, **text) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path``."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8",
                      errors: str | None = None) -> Path:
    """Write ``text`` to ``path`` atomically; returns ``path``."""
    with atomic_open(path, "w", encoding=encoding, errors=errors) as fh:
        fh.write(text)
    return Path(path)


def write_json_atomic(path: str | os.PathLike, value: Any, *, indent: int | None = 2, ensure_ascii: bool = False,
                      sort_keys: bool = False, default: Callable[[Any], Any] | None = None) -> Path:
    """Write ``value`` as JSON (``json.dumps`` with these options) and a newline, atomically."""
    text = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys, default=default)
    return atomic_write_text(path, text + "\n")


def write_jsonl_atomic(path: str | os.PathLike, records: Iterable[Any], *, ensure_ascii: bool = False,
                       sort_keys: bool = False, default: Callable[[Any], Any] | None = None) -> int:
    """Write each record as one line of JSON, atomically; returns how many were written. ``records``
    may be a generator: an error it raises leaves no file behind."""
    count = 0
    with atomic_open(path, "w") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=ensure_ascii, sort_keys=sort_keys, default=default) + "\n")
            count += 1
    return count
