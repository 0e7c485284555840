"""Open a corpus file that may be bzip2- or gzip-compressed (told by its magic bytes, not its name)."""

from __future__ import annotations

import bz2
import gzip
import io
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from wiki_sim.errors import WikiSimError


class _CountingRaw(io.RawIOBase):
    """Reports how many bytes of the file itself (compressed, if it is) have been read."""

    def __init__(self, f: BinaryIO, on_read: Callable[[int], None] | None):
        self._f = f
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._f.readinto(buffer)  # type: ignore[attr-defined]
        if n and self._on_read is not None:
            self._on_read(n)
        return n


def compression(path: Path) -> str:
    """``'bz2'``, ``'gzip'`` or ``'none'``; a ``.bz2``/``.gz`` name with other content is an error."""
    with open(path, "rb") as f:
        magic = f.read(3)
    if magic == b"BZh":
        return "bz2"
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if path.suffix.lower() in (".bz2", ".gz"):
        raise WikiSimError(f"{path} is not a valid {path.suffix} file (bad magic bytes {magic!r})")
    return "none"


@contextmanager
def open_compressed(path: Path, on_read: Callable[[int], None] | None = None) -> Iterator[BinaryIO]:
    """The decompressed byte stream (readable, iterable by line); ``on_read`` gets file byte counts."""
    kind = compression(path)
    with open(path, "rb", buffering=0) as f:
        raw = io.BufferedReader(_CountingRaw(f, on_read), 1 << 16)
        if kind == "bz2":
            stream: Any = bz2.BZ2File(raw)
        elif kind == "gzip":
            stream = gzip.GzipFile(fileobj=raw)
        else:
            stream = raw
        with stream:
            yield stream
