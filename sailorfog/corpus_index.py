"""The synthesizer's corpus index on disk: built once per simulator, memory-mapped per run.

:class:`sailorfog.corpus.CorpusIndex` holds every page's words, years, numbers, type and
links in Python sets: at 100k pages 38 s to build and 1 GB per run, about 8 GB at 1M.
:func:`write_corpus_index` streams the same features through ``wiki_sim.WikiSim``'s bulk
API into flat files (sorted keys and CSR postings, in bounded memory: postings pass through
a temporary file and are placed by a counting sort), and :class:`DiskCorpusIndex` answers
the same questions from them, memory-mapped (processes share the pages; a run pays only
for the candidate sets it asks for). :func:`open_corpus_index` opens the index stored with
the simulator (``<wiki>/synth_index``), or the one cached for it (keyed by its build
record), building it the first time.
"""

from __future__ import annotations

import json
import os
import shutil
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from sailorfog.corpus_files import FORMAT, NO_YEAR, SEP, title_hash, write_corpus_index
from sailorfog.corpus import CACHE_BYTES
from sailorfog.describe import type_key
from sailorfog.pagesets import ByteLRU, as_pages, distinct
from sailorfog.text import display_title

INDEX_DIR = "synth_index"


class _Strings:
    """A read-only sequence of strings from a UTF-8 blob and offsets (sorted when keys)."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray):
        self._blob, self._off = blob, offsets

    def __len__(self) -> int:
        return len(self._off) - 1

    def __getitem__(self, i: int) -> str:
        return bytes(self._blob[int(self._off[i]):int(self._off[i + 1])]).decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


class _Sets:
    """``view[p]``: the set (or frozenset) of CSR row ``p``."""

    def __init__(self, offsets: np.ndarray, values: np.ndarray, frozen: bool = False):
        self._off, self._val, self._kind = offsets, values, frozenset if frozen else set

    def __len__(self) -> int:
        return len(self._off) - 1

    def __getitem__(self, p: int) -> Any:
        return self._kind(self._val[int(self._off[p]):int(self._off[p + 1])].tolist())

    def gather(self, pages: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(row, value) of every value of the rows ``pages``, in one vectorized read."""
        rows = np.fromiter(pages, np.int64)
        starts, ends = self._off[rows], self._off[rows + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if not total:
            return rows[:0], self._val[:0]
        first = np.cumsum(lengths) - lengths
        positions = np.repeat(starts - first, lengths) + np.arange(total)
        return np.repeat(rows, lengths), self._val[positions]


class _Column:
    """``column[p]``: a per-page integer as a Python int (``missing`` where it holds ``NO_YEAR``)."""

    def __init__(self, values: np.ndarray, missing: bool = False):
        self.values, self._missing = values, missing

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, p: int) -> int | None:
        v = int(self.values[p])
        return None if self._missing and v == NO_YEAR else v

    def __iter__(self) -> Iterator[int | None]:
        return (None if self._missing and v == NO_YEAR else v for v in self.values.tolist())


class _Types:
    def __init__(self, strings: _Strings):
        self._s = strings

    def __len__(self) -> int:
        return len(self._s)

    def __getitem__(self, p: int) -> tuple[str, ...]:
        s = self._s[p]
        return tuple(s.split(SEP)) if s else ()


class _TitleIds:
    """``title -> page id`` through a sorted array of 64-bit title hashes (one title read per lookup)."""

    def __init__(self, titles: _Strings, hashes: np.ndarray, pids: np.ndarray):
        self._titles, self._hashes, self._pids = titles, hashes, pids

    def get(self, title: Any, default: Any = None) -> Any:
        if not isinstance(title, str):
            return default
        h = title_hash(title)
        i = int(np.searchsorted(self._hashes, np.uint64(h)))  # a Python int above 2**63 would copy the array
        while i < len(self._hashes) and int(self._hashes[i]) == h:
            pid = int(self._pids[i])
            if self._titles[pid] == title:
                return pid
            i += 1
        return default

    def __getitem__(self, title: str) -> int:
        pid = self.get(title)
        if pid is None:
            raise KeyError(title)
        return pid

    def __contains__(self, title: object) -> bool:
        return self.get(title) is not None

    def __len__(self) -> int:
        return len(self._pids)


class _Postings:
    """Sorted keys (strings, or ints for years) -> page-id arrays."""

    def __init__(self, path: Path, name: str):
        off = _load(path, f"{name}.off.npy")
        self.post = _load(path, f"{name}.post.npy")
        self.off = off
        if (path / f"{name}.keys.npy").is_file():
            self.keys: Any = _load(path, f"{name}.keys.npy")
            self.numeric = True
        else:
            self.keys = _Strings(_blob(path / f"{name}.keys.bin"), _load(path, f"{name}.koff.npy"))
            self.numeric = False

    def _row(self, i: int) -> np.ndarray:
        return self.post[int(self.off[i]):int(self.off[i + 1])]

    def get(self, key: Any) -> np.ndarray:
        if self.numeric:
            i = int(np.searchsorted(self.keys, np.int64(key)))
            found = i < len(self.keys) and int(self.keys[i]) == key
        else:
            i = bisect_left(self.keys, key)
            found = i < len(self.keys) and self.keys[i] == key
        return self._row(i) if found else self.post[:0]

    def size(self, key: Any) -> int:
        return len(self.get(key))

    def span(self, lo: Any, hi: Any) -> np.ndarray:
        """Pages of every key in ``[lo, hi]`` (numeric keys), or starting with ``lo`` (strings, ``hi`` unused)."""
        if self.numeric:
            i, j = int(np.searchsorted(self.keys, lo, "left")), int(np.searchsorted(self.keys, hi, "right"))
        else:
            i = bisect_left(self.keys, lo)
            j = bisect_right(self.keys, lo + "\U0010ffff") if lo else len(self.keys)
        return self.post[int(self.off[i]):int(self.off[j])] if j > i else self.post[:0]


def _blob(path: Path) -> np.ndarray:
    return np.memmap(path, np.uint8, mode="r").view(np.ndarray) if path.stat().st_size else np.zeros(0, np.uint8)


def _load(path: Path, name: str) -> np.ndarray:
    """A memory-mapped array as a plain ndarray (numpy's memmap subclass is slow to index)."""
    array = np.load(path / name, mmap_mode="r")
    return array.view(np.ndarray) if isinstance(array, np.memmap) else array


class DiskCorpusIndex:
    """:class:`sailorfog.corpus.CorpusIndex`'s reading API over the files of :func:`write_corpus_index`."""

    def __init__(self, path: str | Path, cache_bytes: int = CACHE_BYTES):
        path = self.path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"the corpus index at {path} has format {meta.get('format')}, expected {FORMAT}")
        self._n = int(meta["pages"])
        self.titles = _Strings(_blob(path / "titles.bin"), _load(path, "titles.off.npy"))
        self.ids = _TitleIds(self.titles, _load(path, "title_hash.npy"), _load(path, "title_hash_pid.npy"))
        self.inbound = _Column(_load(path, "inbound.npy"))
        self.page_min_year = _Column(_load(path, "min_year.npy"), missing=True)
        self.page_years = _Sets(_load(path, "years.off.npy"), _load(path, "years.val.npy"), frozen=True)
        self.neighbors = _Sets(_load(path, "nb.off.npy"), _load(path, "nb.val.npy"))
        self.page_type = _Types(_Strings(_blob(path / "types.bin"), _load(path, "types.off.npy")))
        self._degree = np.diff(_load(path, "nb.off.npy"))
        self._name_words = _load(path, "name_words.npy")
        self._person = _load(path, "person.npy")
        self._num_val, self._num_pid = _load(path, "num.val.npy"), _load(path, "num.pid.npy")
        self._post = {name: _Postings(path, name) for name in ("word", "desc", "year", "fact", "type", "prefix2",
                                                                "initials")}
        if not len(self.titles) == self._n == len(self.inbound) == len(self.neighbors) == len(self.page_type):
            raise ValueError(f"the corpus index at {path} is inconsistent; delete it to rebuild")
        self.cache = ByteLRU(cache_bytes)
        """Candidate sets by check (:mod:`sailorfog.constraints`), bounded in bytes."""
        self._linked: set[int] | None = None
        self._everything: frozenset[int] | None = None
        self._solver: dict[str, Any] | None = None
        self._typed: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n

    def everything(self) -> frozenset[int]:
        if self._everything is None:
            self._everything = frozenset(range(self._n))
        return self._everything

    def linked(self) -> set[int]:
        if self._linked is None:
            self._linked = set(np.flatnonzero(self._degree).tolist())
        return self._linked

    # --- arrays for the constraint solver (sailorfog.constraints uses them when present) ---
    def solver_arrays(self) -> dict[str, Any]:
        """Adjacency and years as CSR arrays, earliest years, every year, the linked pages (views
        of the memory-mapped files, but for the last two)."""
        if self._solver is None:
            years = self._post["year"]
            self._solver = {"n": self._n, "nb_off": self.neighbors._off, "nb_val": self.neighbors._val,
                            "y_off": self.page_years._off, "y_val": self.page_years._val,
                            "min_year": self.page_min_year.values, "years": np.asarray(years.keys, np.int64),
                            "linked": np.flatnonzero(self._degree)}
        return self._solver

    def typed(self) -> np.ndarray:
        """Whether each page's defining sentence gives a type."""
        if self._typed is None:
            self._typed = np.diff(self.page_type._s._off) > 0
        return self._typed

    def degrees(self) -> np.ndarray:
        return self._degree

    def unary_array(self, check: Any) -> np.ndarray:
        """The pages satisfying a unary check (:mod:`sailorfog.constraints`), a sorted array."""
        kind = check["type"]
        if kind in ("words", "description"):
            out = self._all_of("desc" if kind == "description" else "word", list(check["words"]), arrays=True)
            return np.arange(self._n) if out is None else out
        if kind == "type":
            out = self._all_of("type", type_key(check["words"]), arrays=True)
            return np.zeros(0, np.int64) if out is None else out
        if kind == "person":
            return np.flatnonzero(self._person)
        if kind == "name_words":
            n = check["n"]
            return np.flatnonzero(self._name_words == n) if 0 <= n < 256 else np.zeros(0, np.int64)
        if kind == "year":
            return distinct(self._post["year"].span(int(check["lo"]), int(check["hi"])), self._n)
        if kind == "number":
            return distinct(self._numbers(check["lo"], check["hi"]), self._n)
        if kind == "fact":
            return as_pages(self._post["fact"].get(
                f"{check['key']}{SEP}{' '.join(check['value'].split()).lower()}"))
        if kind == "prefix":
            return self._prefix(check["prefix"])
        if kind == "initials":
            return as_pages(self._post["initials"].get(
                check["initials"].replace(".", "").replace(" ", "").upper()))
        if kind == "title":
            pid = self.ids.get(check["title"])
            return np.asarray([] if pid is None else [pid], np.int64)
        raise ValueError(f"unknown check type {kind!r}")

    # --- bulk reads for the constraint solver (sailorfog.constraints uses them when present) ---
    def neighbors_of(self, pages: Iterable[int]) -> set[int]:
        """Every page linked with one of ``pages``."""
        return set(self.neighbors.gather(pages)[1].tolist())

    def years_of(self, pages: Iterable[int]) -> list[int]:
        """Every year of ``pages``, sorted."""
        return np.unique(self.page_years.gather(pages)[1]).tolist()

    def with_year_near(self, pages: Iterable[int], sorted_years: list[int], lo: float, hi: float) -> set[int]:
        """Those of ``pages`` with a year y such that some of ``sorted_years`` is in [y + lo, y + hi]."""
        rows, ys = self.page_years.gather(pages)
        if not len(rows) or not sorted_years:
            return set()
        values = np.asarray(sorted_years, np.float64)
        ys = ys.astype(np.float64)
        i = np.searchsorted(values, ys + lo, "left")
        ok = i < len(values)
        ok[ok] = values[i[ok]] <= (ys + hi)[ok]
        return set(np.unique(rows[ok]).tolist())

    def _all_of(self, name: str, keys: Iterable[Any], arrays: bool = False) -> Any:
        """Pages holding every key (``None``: no keys), a set (a sorted array with ``arrays``)."""
        from sailorfog.pagesets import intersect

        post = self._post[name]
        rows = sorted((as_pages(post.get(k)) for k in keys), key=len)
        if not rows:
            return None
        out = rows[0]
        for a in rows[1:]:
            if not len(out):
                break
            out = intersect(out, a)
        return out if arrays else set(out.tolist())

    def with_words(self, words: Iterable[str], description: bool = False) -> set[int]:
        out = self._all_of("desc" if description else "word", list(words))
        return set(range(self._n)) if out is None else out

    def with_type(self, words: Iterable[str]) -> set[int]:
        out = self._all_of("type", type_key(words))
        return set() if out is None else out

    def with_person(self) -> set[int]:
        return set(np.flatnonzero(self._person).tolist())

    def with_name_words(self, n: int) -> set[int]:
        return set(self.unary_array({"type": "name_words", "n": n}).tolist())

    def with_year(self, lo: int, hi: int) -> set[int]:
        return set(self._post["year"].span(int(lo), int(hi)).tolist())

    def _numbers(self, lo: float, hi: float) -> np.ndarray:
        i, j = np.searchsorted(self._num_val, lo, "left"), np.searchsorted(self._num_val, hi, "right")
        return self._num_pid[i:j]

    def with_number(self, lo: float, hi: float) -> set[int]:
        return set(self._numbers(lo, hi).tolist())

    def with_fact(self, key: str, value: str) -> set[int]:
        return set(self._post["fact"].get(f"{key}{SEP}{' '.join(value.split()).lower()}").tolist())

    def _prefix(self, prefix: str) -> np.ndarray:
        p = prefix.lower()
        if len(p) >= 2:
            return np.fromiter((i for i in self._post["prefix2"].get(p[:2]).tolist()
                                if display_title(self.titles[i]).lower().startswith(p)), np.int64)
        return distinct(self._post["prefix2"].span(p, None), self._n)

    def with_prefix(self, prefix: str) -> set[int]:
        return set(self._prefix(prefix).tolist())

    def with_initials(self, initials: str) -> set[int]:
        return set(self._post["initials"].get(initials.replace(".", "").replace(" ", "").upper()).tolist())


def open_corpus_index(sim: Any) -> DiskCorpusIndex:
    """The corpus index of a :class:`wiki_sim.WikiSim`: ``<wiki>/synth_index`` if there, else
    the one cached for this simulator (``$WEBSAILOR_CACHE``/``~/.cache/websailor-gym``, keyed
    by its path and build record), written there the first time (once per simulator build)."""
    wiki = Path(sim.path).absolute()
    places = [wiki / INDEX_DIR, _cache_place(wiki)]
    for place in places:
        if (place / "meta.json").is_file():
            try:
                return DiskCorpusIndex(place)
            except (OSError, ValueError, KeyError):  # damaged or of another format: written again
                shutil.rmtree(place, ignore_errors=True)
    for place in places[1:] if not os.access(wiki, os.W_OK) else places:
        try:
            write_corpus_index(sim, place)
        except OSError:
            if not (place / "meta.json").is_file():  # not writable; another process's complete copy is kept
                continue
        return DiskCorpusIndex(place)
    raise OSError(f"no place to write the corpus index of {wiki} (tried {', '.join(map(str, places))})")


def _cache_place(wiki: Path) -> Path:
    from wiki_sim.common.cache import derived_cache_dir

    return derived_cache_dir(wiki, "synth_index")
