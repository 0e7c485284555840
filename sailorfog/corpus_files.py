"""Writing the synthesizer's corpus index files (read by :mod:`sailorfog.corpus_index`).

One pass over ``WikiSim.iter_pages`` / ``page`` (the features of
:meth:`sailorfog.corpus.CorpusIndex.add_page`), one over ``iter_facts``, one over
``iter_links``. Inverted lists go as (key id, page id) pairs to a temporary file and are
placed by a counting sort into CSR arrays, chunk by chunk, so memory holds the key
dictionaries, per-page arrays and one chunk, not the postings.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from sailorfog.corpus import _initials
from sailorfog.describe import PERSON_HEADS, defining_type, type_key
from sailorfog.text import display_title, numbers, years
from wiki_sim.focus import tokenize

FORMAT = 16
NO_YEAR = int(np.iinfo(np.int32).min)
SEP = "\x1f"
_FLUSH = 1 << 20
_CHUNK_PAIRS = 1 << 22


def title_hash(title: str) -> int:
    """A stable 64-bit hash of a title (the key of the title -> page id lookup)."""
    return int.from_bytes(hashlib.blake2b(title.encode("utf-8"), digest_size=8).digest(), "little")


class _PostingsWriter:
    """Collects (key, page id) pairs; :meth:`finish` writes sorted keys and CSR postings."""

    def __init__(self, tmp: Path, name: str, numeric: bool = False):
        self.tmp, self.name, self.numeric = tmp, name, numeric
        self.ids: dict[Any, int] = {}
        self._file = open(tmp / f"{name}.pairs", "wb")
        self._buf = array("I")

    def add(self, key: Any, pid: int) -> None:
        tid = self.ids.get(key)
        if tid is None:
            tid = self.ids[key] = len(self.ids)
        self._buf.append(tid)
        self._buf.append(pid)
        if len(self._buf) >= _FLUSH:
            self._buf.tofile(self._file)
            self._buf = array("I")

    def _chunks(self) -> Any:
        pairs = np.memmap(self.tmp / f"{self.name}.pairs", np.uint32, mode="r") \
            if (self.tmp / f"{self.name}.pairs").stat().st_size else np.zeros(0, np.uint32)
        for start in range(0, len(pairs), 2 * _CHUNK_PAIRS):
            chunk = np.asarray(pairs[start:start + 2 * _CHUNK_PAIRS])
            yield chunk[0::2], chunk[1::2]

    def finish(self, out: Path) -> None:
        self._buf.tofile(self._file)
        self._file.close()
        keys = sorted(self.ids)
        rank = np.empty(len(keys), np.int64)
        rank[np.fromiter((self.ids[k] for k in keys), np.int64, len(keys))] = np.arange(len(keys))
        counts = np.zeros(len(keys), np.int64)
        for t, _ in self._chunks():
            counts += np.bincount(rank[t], minlength=len(keys))
        offsets = np.zeros(len(keys) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        post = np.lib.format.open_memmap(out / f"{self.name}.post.npy", "w+", np.uint32, (int(offsets[-1]),))
        cursor = offsets[:-1].copy()
        for t, p in self._chunks():
            t = rank[t]
            order = np.argsort(t, kind="stable")  # page order kept within a key
            t, p = t[order], p[order]
            uniq, first, cnt = np.unique(t, return_index=True, return_counts=True)
            post[cursor[t] + (np.arange(len(t)) - np.repeat(first, cnt))] = p
            cursor[uniq] += cnt
        post.flush()
        del post
        np.save(out / f"{self.name}.off.npy", offsets)
        if self.numeric:
            np.save(out / f"{self.name}.keys.npy", np.asarray(keys, np.int64))
        else:
            _write_strings(out, f"{self.name}.keys.bin", f"{self.name}.koff.npy", keys)
        os.unlink(self.tmp / f"{self.name}.pairs")


def _write_strings(out: Path, blob_name: str, off_name: str, strings: Any) -> None:
    offsets = array("q", [0])
    with open(out / blob_name, "wb") as f:
        for s in strings:
            b = s.encode("utf-8")
            f.write(b)
            offsets.append(offsets[-1] + len(b))
    np.save(out / off_name, np.frombuffer(offsets, np.int64))


def _csr(rows: np.ndarray, values: np.ndarray, n: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, values sorted within rows, without repeats) of (row, value) pairs."""
    combined = np.unique(rows.astype(np.int64) * (1 << 32) + (values.astype(np.int64) & 0xFFFFFFFF))
    r, v = combined >> 32, (combined & 0xFFFFFFFF)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=offsets[1:])
    return offsets, v.astype(dtype)


def write_corpus_index(sim: Any, out_dir: str | Path) -> dict[str, int]:
    """Write the corpus index of a :class:`wiki_sim.WikiSim` to ``out_dir`` (built beside it
    and renamed in: readers never see a half-written index)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        counts = _write_into(sim, tmp)
        os.chmod(tmp, 0o755)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts


def _write_into(sim: Any, tmp: Path) -> dict[str, int]:
    post = {name: _PostingsWriter(tmp, name, numeric=name == "year")
            for name in ("word", "desc", "year", "fact", "type", "prefix2", "initials")}
    ids: dict[str, int] = {}
    inbound, min_year, name_words, person = array("q"), array("i"), array("B"), array("B")
    year_rows, year_vals, num_vals, num_pids = array("I"), array("i"), array("d"), array("I")
    with open(tmp / "titles.bin", "wb") as titles_file, open(tmp / "types.bin", "wb") as types_file:
        title_off, type_off = array("q", [0]), array("q", [0])
        for info in sim.iter_pages():
            title = info.title
            text = (sim.page(title) or {}).get("text", "")
            pid = len(inbound)
            ids[title] = pid
            b = title.encode("utf-8")
            titles_file.write(b)
            title_off.append(title_off[-1] + len(b))
            for word in set(tokenize(f"{display_title(title)} {text}")):
                post["word"].add(word, pid)
            ys = sorted(set(years(text)))
            for y in ys:
                post["year"].add(y, pid)
                year_rows.append(pid)
                year_vals.append(y)
            min_year.append(ys[0] if ys else NO_YEAR)
            for value in set(numbers(text)):
                num_vals.append(value)
                num_pids.append(pid)
            kind = tuple(defining_type(text))
            b = SEP.join(kind).encode("utf-8")
            types_file.write(b)
            type_off.append(type_off[-1] + len(b))
            for word in type_key(kind):
                post["type"].add(word, pid)
            person.append(bool(kind) and kind[-1].lower() in PERSON_HEADS)
            name = display_title(title)
            name_words.append(min(len(name.split()), 255))
            post["prefix2"].add(name[:2].lower(), pid)
            post["initials"].add(_initials(title), pid)
            inbound.append(int(info.inbound_links))
    n = len(inbound)
    if not n:
        raise ValueError(f"the simulator at {getattr(sim, 'path', sim)} has no pages")
    for page, key, value, _source, _target in sim.iter_facts():
        pid = ids.get(page)
        key, value = str(key or ""), " ".join(str(value or "").split())
        if pid is None:
            continue
        if key == "description":
            for word in set(tokenize(value)):
                post["desc"].add(word, pid)
        elif key and value:
            post["fact"].add(f"{key}{SEP}{value.lower()}", pid)
    src, dst = array("I"), array("I")
    for link in sim.iter_links():
        a, b = ids.get(link.source), ids.get(link.target)
        if a is not None and b is not None and a != b:
            src.extend((a, b))
            dst.extend((b, a))
    for writer in post.values():
        writer.finish(tmp)
    np.save(tmp / "titles.off.npy", np.frombuffer(title_off, np.int64))
    np.save(tmp / "types.off.npy", np.frombuffer(type_off, np.int64))
    hashes = np.fromiter((title_hash(t) for t in ids), np.uint64, len(ids))
    pids = np.fromiter(ids.values(), np.uint32, len(ids))
    order_h = np.argsort(hashes, kind="stable")
    np.save(tmp / "title_hash.npy", hashes[order_h])
    np.save(tmp / "title_hash_pid.npy", pids[order_h])
    np.save(tmp / "inbound.npy", np.frombuffer(inbound, np.int64))
    np.save(tmp / "min_year.npy", np.frombuffer(min_year, np.int32))
    np.save(tmp / "name_words.npy", np.frombuffer(name_words, np.uint8))
    np.save(tmp / "person.npy", np.frombuffer(person, np.uint8).astype(bool))
    num_v, num_p = np.frombuffer(num_vals, np.float64), np.frombuffer(num_pids, np.uint32)
    order_n = np.lexsort((num_p, num_v))
    np.save(tmp / "num.val.npy", num_v[order_n])
    np.save(tmp / "num.pid.npy", num_p[order_n])
    y_off, y_val = _csr(np.frombuffer(year_rows, np.uint32), np.frombuffer(year_vals, np.int32), n, np.int32)
    np.save(tmp / "years.off.npy", y_off)
    np.save(tmp / "years.val.npy", y_val)
    nb_off, nb_val = _csr(np.frombuffer(src, np.uint32), np.frombuffer(dst, np.uint32), n, np.uint32)
    np.save(tmp / "nb.off.npy", nb_off)
    np.save(tmp / "nb.val.npy", nb_val)
    counts = {"pages": n, "words": len(post["word"].ids), "links": int(len(nb_val)) // 2}
    (tmp / "meta.json").write_text(json.dumps({"format": FORMAT, **counts}))
    return counts
