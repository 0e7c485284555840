"""A Whoosh index read as data: opening or searching a simulator folder runs no code from it.

Whoosh keeps pickles in its index: the schema and the segment list in the table of contents
(``index/_MAIN_<gen>.toc``), and inside each segment its compound directory, every posting
block's header and data, inlined postings and stored fields. A pickle may name any importable
callable (``os.system``), and a simulator folder is shared data, so nothing here unpickles with
the standard unpickler:

- :func:`open_index` reads the table of contents itself. The pickled schema is skipped unread
  and the schema the code defines is used; the segment list goes through :class:`DataUnpickler`.
- :func:`read_pickles_as_data` points Whoosh's segment readers at the same unpickler.

:class:`DataUnpickler` resolves only the names a W3 index holds (its segment and codec classes,
``int``, ``defaultdict``, the bytes encoder of protocol-2 pickles); any other name raises
:class:`~wiki_sim.errors.WikiSimError` before anything is called.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from whoosh import columns, formats
from whoosh.codec import whoosh3
from whoosh.filedb import structfile
from whoosh.filedb.filestore import FileStorage
from whoosh.index import _CURRENT_TOC_VERSION, TOC, EmptyIndexError, FileIndex
from whoosh.system import _FLOAT_SIZE, _INT_SIZE, _LONG_SIZE

from wiki_sim.errors import WikiSimError

INDEX_NAME = "MAIN"
ALLOWED_GLOBALS = frozenset({
    ("builtins", "int"),
    ("builtins", "float"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("collections", "defaultdict"),
    ("_codecs", "encode"),  # how protocol-2 pickles spell bytes
    ("whoosh.codec.whoosh3", "W3Codec"),
    ("whoosh.codec.whoosh3", "W3Segment"),
})
"""The only ``(module, name)`` pairs an index pickle may name."""
_MAGIC = -12345


class DataUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data and the W3 segment classes, nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED_GLOBALS:
            raise WikiSimError(f"the search index holds a pickle naming {module}.{name}, which is not index data; "
                               "refusing to load it (rebuild the simulator with `websailor wiki build`)")
        return super().find_class(module, name)


def data_load(file: Any, **_: Any) -> Any:
    """``pickle.load`` through :class:`DataUnpickler`."""
    return DataUnpickler(file).load()


def data_loads(data: bytes, **_: Any) -> Any:
    """``pickle.loads`` through :class:`DataUnpickler`."""
    return DataUnpickler(io.BytesIO(data)).load()


def read_pickles_as_data() -> None:
    """Make Whoosh's segment readers unpickle through :class:`DataUnpickler` (idempotent).

    These are the module-level names Whoosh's reading paths call: ``read_pickle`` (compound
    directories, posting block headers, hash tables), posting block data and inlined postings
    (W3 codec), stored fields (pickle columns) and format-encoded values.
    """
    structfile.load_pickle = data_load
    whoosh3.loads = data_loads
    columns.loads = data_loads
    formats.loads = data_loads


class DataFileIndex(FileIndex):
    """A Whoosh ``FileIndex`` whose table of contents is read by :func:`read_toc`."""

    def __init__(self, storage: Any, schema: Any, indexname: str = INDEX_NAME):
        self.storage = storage
        self._schema = schema
        self.indexname = indexname
        self._read_toc()  # fails now, as Whoosh's own constructor does, if it cannot be read

    def _read_toc(self) -> TOC:
        return read_toc(self.storage, self.indexname, self._schema)


def read_toc(storage: Any, indexname: str, schema: Any) -> TOC:
    """The newest table of contents in ``storage``, with ``schema`` in place of the pickled one."""
    gen = TOC._latest_generation(storage, indexname)
    if gen < 0:
        raise EmptyIndexError(f"index {indexname!r} does not exist in {storage!r}")
    name = TOC._filename(indexname, gen)
    where = f"{getattr(storage, 'folder', storage)}/{name}"
    stream = storage.open_file(name)
    try:
        try:
            sizes = (stream.read_varint(), stream.read_varint(), stream.read_varint())
            if sizes != (_INT_SIZE, _LONG_SIZE, _FLOAT_SIZE) or stream.read_int() != _MAGIC:
                raise WikiSimError(f"{where} is not a Whoosh table of contents this machine can read; rebuild the "
                                   "simulator with `websailor wiki build`")
            version = stream.read_int()
            release = (stream.read_varint(), stream.read_varint(), stream.read_varint())
            if version != _CURRENT_TOC_VERSION:
                raise WikiSimError(f"{where} has Whoosh index format {version}, expected {_CURRENT_TOC_VERSION}; "
                                   "rebuild the simulator with `websailor wiki build`")
            stream.skip_string()  # the pickled schema: never unpickled, the caller's schema is used
            if stream.read_int() != gen:
                raise WikiSimError(f"{where} names another generation; rebuild the simulator")
            stream.read_int()  # unused by Whoosh
            segments = data_load(stream.file)
        except WikiSimError:
            raise
        except Exception as exc:  # truncated or garbled: struct, EOF, pickle errors
            raise WikiSimError(f"{where} is unreadable ({type(exc).__name__}); rebuild the simulator") from None
    finally:
        stream.close()
    if not isinstance(segments, list) or not all(isinstance(s, whoosh3.W3Segment) for s in segments):
        raise WikiSimError(f"{where} does not hold a list of segments; rebuild the simulator")
    return TOC(schema, segments, gen, version=version, release=release)


def index_exists(index_dir: str | Path, indexname: str = INDEX_NAME) -> bool:
    """Whether ``index_dir`` holds a table of contents (read nothing from it)."""
    path = Path(index_dir)
    return path.is_dir() and TOC._latest_generation(FileStorage(str(path)), indexname) >= 0


def open_index(index_dir: str | Path, schema: Any) -> DataFileIndex:
    """Open the Whoosh index in ``index_dir`` with ``schema`` (the code's own), reading its
    pickles as data only (see the module docstring)."""
    read_pickles_as_data()
    return DataFileIndex(FileStorage(str(index_dir)), schema)
