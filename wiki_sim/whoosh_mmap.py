"""Whoosh segment files read from the operating system's page cache, not copied per process.

Whoosh maps a segment's compound file (``*.seg``) read-only, then wraps each file inside it
(postings, term index, columns) in a ``BufferFile``, which copies it into an ``io.BytesIO``:
every process that opens the index holds a private copy of most of the index (13 MB per
process at 10k pages, growing with the corpus). :func:`read_segments_in_place` replaces that
wrapper with :class:`MappedBufferFile`, which reads straight from the map, so every process
opening the same index (search helpers, the sub-environments of a vector environment) shares
one copy through the page cache. Reads return the same bytes; only where they come from changes.
"""

from __future__ import annotations

import io
from typing import Any, Iterator

from whoosh.filedb import compound
from whoosh.filedb.structfile import BufferFile

_LINE_CHUNK = 256
_PEEK_BYTES = 512


class MemoryReader(io.RawIOBase):
    """A read-only, seekable file over a buffer (a slice of a memory map), without copying it."""

    def __init__(self, buf: Any):
        super().__init__()
        self._buf = memoryview(buf).cast("B") if not isinstance(buf, memoryview) or buf.format != "B" else buf
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._buf)}[whence]
        if base + pos < 0:
            raise ValueError(f"negative seek position {base + pos}")
        self._pos = base + pos
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._buf) if size is None or size < 0 else min(len(self._buf), self._pos + size)
        if end <= self._pos:
            return b""
        out = bytes(self._buf[self._pos:end])
        self._pos = end
        return out

    def peek(self, size: int = 0) -> bytes:
        """Up to :data:`_PEEK_BYTES` bytes ahead, without moving: the unpickler prefetches
        through this (Whoosh unpickles a small tuple per posting block) instead of calling
        :meth:`read` for every few bytes."""
        return bytes(self._buf[self._pos:self._pos + min(max(size, 1), _PEEK_BYTES)])

    def readinto(self, b: Any) -> int:
        data = self.read(len(memoryview(b).cast("B")))
        memoryview(b).cast("B")[:len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        limit = len(self._buf) if size is None or size < 0 else min(len(self._buf), self._pos + size)
        at = self._pos
        while at < limit:
            chunk = bytes(self._buf[at:min(limit, at + _LINE_CHUNK)])
            newline = chunk.find(b"\n")
            if newline >= 0:
                return self.read(at + newline + 1 - self._pos)
            at += len(chunk)
        return self.read(limit - self._pos)

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line


class MappedBufferFile(BufferFile):
    """Whoosh's ``BufferFile`` reading from its buffer in place (see the module docstring)."""

    def __init__(self, buf: Any, name: str | None = None, onclose: Any = None):
        super().__init__(b"", name=name, onclose=onclose)
        self._buf = buf
        self.file = MemoryReader(buf)

    def subset(self, position: int, length: int, name: str | None = None) -> "MappedBufferFile":
        return MappedBufferFile(self._buf[position:position + length], name=name or self._name)


def read_segments_in_place() -> None:
    """Make Whoosh's compound segment files read from their memory map (idempotent; reading only:
    Whoosh writes segments through other files)."""
    compound.BufferFile = MappedBufferFile
