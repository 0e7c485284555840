"""Read-only, memory-mapped tables that every process opening a simulator shares.

A table is raw little-endian binary files beside each other: the operating system maps
them into each process that opens them, so the search helper processes and the
sub-environments of a vector environment read one copy through the page cache instead of
each loading its own (opening costs a few system calls, whatever the corpus size).

- a number array: ``NAME.i32`` / ``NAME.i64`` / ``NAME.f64`` (:func:`open_array`, :class:`ArrayWriter`)
- a string table: ``NAME.bin`` (the UTF-8 strings end to end) and ``NAME.off.i64`` (``n + 1``
  byte offsets); string ``i`` is ``bin[off[i]:off[i + 1]]`` (:class:`StringTable`,
  :class:`StringTableWriter`)

Writers stream: they hold one buffer of at most ``buffer_items`` numbers, never the table.
"""

from __future__ import annotations

import mmap
import os
from bisect import bisect_left
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

_DTYPES = {"i32": np.dtype("<i4"), "i64": np.dtype("<i8"), "f64": np.dtype("<f8")}


def open_array(path: str | Path) -> np.ndarray:
    """A read-only memory map of a raw number array (dtype from the suffix ``.i32``/``.i64``/``.f64``)."""
    path = Path(path)
    dtype = _DTYPES[path.suffix.lstrip(".")]
    if path.stat().st_size == 0:
        return np.zeros(0, dtype)
    # A plain ndarray view: slicing a np.memmap costs a Python-level __array_finalize__ per slice.
    return np.memmap(path, dtype=dtype, mode="r").view(np.ndarray)


class ArrayWriter:
    """Append numbers to a raw array file, a buffer at a time."""

    def __init__(self, path: str | Path, buffer_items: int = 1 << 16):
        self.path = Path(path)
        self.dtype = _DTYPES[self.path.suffix.lstrip(".")]
        self._file = open(self.path, "xb")
        self._buffer: list[int] = []
        self._limit = buffer_items
        self.count = 0

    def append(self, value: int) -> None:
        self._buffer.append(value)
        self.count += 1
        if len(self._buffer) >= self._limit:
            self.flush()

    def extend(self, values: np.ndarray) -> None:
        self.flush()
        np.asarray(values, dtype=self.dtype).tofile(self._file)
        self.count += len(values)

    def flush(self) -> None:
        if self._buffer:
            np.array(self._buffer, dtype=self.dtype).tofile(self._file)
            self._buffer = []

    def close(self) -> None:
        self.flush()
        self._file.close()


class StringTableWriter:
    """Append strings to a string table (``NAME.bin`` and ``NAME.off.i64``)."""

    def __init__(self, directory: str | Path, name: str):
        directory = Path(directory)
        self._blob = open(directory / f"{name}.bin", "xb", buffering=1 << 20)
        self._offsets = ArrayWriter(directory / f"{name}.off.i64")
        self._offsets.append(0)
        self._at = 0

    def append(self, value: str) -> None:
        data = value.encode("utf-8", "surrogatepass")
        self._blob.write(data)
        self._at += len(data)
        self._offsets.append(self._at)

    def close(self) -> None:
        self._blob.close()
        self._offsets.close()


def write_string_table(directory: str | Path, name: str, values: Iterable[str]) -> int:
    """Write ``values`` as a string table; return how many."""
    writer = StringTableWriter(directory, name)
    n = 0
    for value in values:
        writer.append(value)
        n += 1
    writer.close()
    return n


class StringTable:
    """A memory-mapped string table: ``table[i]``, ``len(table)``, iteration; :meth:`find`
    (binary search) when the strings were written in sorted order."""

    def __init__(self, directory: str | Path, name: str):
        directory = Path(directory)
        self._offsets = open_array(directory / f"{name}.off.i64")
        if len(self._offsets) == 0:
            raise ValueError(f"{directory / name}.off.i64 is empty (not a string table)")
        with open(directory / f"{name}.bin", "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._blob: bytes | mmap.mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        if int(self._offsets[-1]) != size:
            raise ValueError(f"{directory / name}.bin holds {size} bytes, its offsets say {int(self._offsets[-1])}")
        self._n = len(self._offsets) - 1

    def __len__(self) -> int:
        return self._n

    def raw(self, i: int) -> bytes:
        return self._blob[int(self._offsets[i]):int(self._offsets[i + 1])]

    def __getitem__(self, i: int) -> str:
        if not -self._n <= i < self._n:
            raise IndexError(i)
        if i < 0:
            i += self._n
        return self.raw(i).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(self._n))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, StringTable)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def find(self, value: str) -> int:
        """The index of ``value`` in a table written in sorted order (UTF-8 byte order), or -1."""
        key = value.encode("utf-8", "surrogatepass")
        i = bisect_left(_RawView(self), key)
        return i if i < self._n and self.raw(i) == key else -1


class _RawView:
    """A sequence of a table's raw strings, for :func:`bisect.bisect_left`."""

    def __init__(self, table: StringTable):
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    def __getitem__(self, i: int) -> bytes:
        return self._table.raw(i)
