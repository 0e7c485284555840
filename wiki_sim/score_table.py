"""The Whoosh engine's per-term BM25F scores, computed once at build time and memory-mapped.

A query term's contribution to every page holding it depends only on the index (see
:class:`wiki_sim.index.IndexSearcher`), so the build computes it for every term of the title,
aliases and body fields and writes the results end to end, in the terms' sorted order:

- ``terms.bin`` / ``terms.off.i64``: the terms (a :class:`wiki_sim.tables.StringTable`);
- ``offsets.i64``: ``terms + 1`` offsets into the two posting arrays;
- ``docs.i32``: document numbers, increasing within a term;
- ``scores.f64``: the term's BM25F score in each of those documents (float64, the same
  numbers the searcher computes from Whoosh's postings);
- ``idf.f64``: each term's body idf (the snippet weight);
- ``meta.json``: the scoring parameters and the counts, checked on open.

A search then slices two arrays per term instead of decoding Whoosh's postings (about half
of a query's time on the default corpus when the term is not cached). The scores are only
valid for the parameters they were computed with: a searcher opened with others reads
Whoosh's postings, as does one opening an index built without the table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from wiki_sim.errors import WikiSimError
from wiki_sim.tables import ArrayWriter, StringTable, StringTableWriter, open_array

SCORES_DIR = "scores"
"""The table's folder, inside the Whoosh index's."""
TABLE_FORMAT = 1
ROW_CACHE = 50_000
"""Terms whose row a table remembers (about 100 bytes each); emptied when full."""
MAX_CACHED_TERM = 64
"""Longer terms are looked up, never remembered."""

TermScores = tuple[np.ndarray, np.ndarray]


def write_score_table(directory: str | Path, terms: Iterable[str],
                      compute: Callable[[str], tuple[np.ndarray, np.ndarray, float]], params: dict[str, float],
                      documents: int) -> dict[str, int]:
    """Write the table of every term of ``terms`` (sorted by UTF-8 bytes, distinct) into the
    new folder ``directory``; ``compute(term)`` gives (document numbers, scores, body idf).
    Streams: holds one term's arrays at a time. Returns ``{"terms", "postings"}``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=False)
    names = StringTableWriter(directory, "terms")
    offsets = ArrayWriter(directory / "offsets.i64")
    docs = ArrayWriter(directory / "docs.i32")
    scores = ArrayWriter(directory / "scores.f64")
    idf = ArrayWriter(directory / "idf.f64")
    offsets.append(0)
    count = postings = 0
    for term in terms:
        ids, values, body_idf = compute(term)
        names.append(term)
        docs.extend(ids)
        scores.extend(values)
        idf.append(body_idf)
        postings += len(ids)
        offsets.append(postings)
        count += 1
    for writer in (names, offsets, docs, scores, idf):
        writer.close()
    meta = {"format": TABLE_FORMAT, "params": params, "documents": documents, "terms": count, "postings": postings}
    (directory / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return {"terms": count, "postings": postings}


class ScoreTable:
    """A built table, memory-mapped: :meth:`scores` and :meth:`idf` of a term."""

    def __init__(self, directory: str | Path, documents: int):
        directory = Path(directory)
        try:
            meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
            self.params = meta["params"]
            self._terms = StringTable(directory, "terms")
            self._offsets = open_array(directory / "offsets.i64")
            self._docs = open_array(directory / "docs.i32")
            self._scores = open_array(directory / "scores.f64")
            self._idf = open_array(directory / "idf.f64")
            consistent = (meta.get("format") == TABLE_FORMAT and meta.get("documents") == documents
                          and len(self._terms) == meta["terms"] == len(self._idf) == len(self._offsets) - 1
                          and int(self._offsets[-1]) == meta["postings"] == len(self._docs) == len(self._scores))
            # a damaged table must not hand out slices that run backwards or pages the index lacks
            consistent = consistent and bool(
                int(self._offsets[0]) == 0 and (np.diff(self._offsets) >= 0).all()
                and (not len(self._docs) or 0 <= int(self._docs.min()) and int(self._docs.max()) < documents))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise WikiSimError(f"the score table at {directory} cannot be read ({exc}); "
                               "rebuild the simulator") from None
        if not consistent:
            raise WikiSimError(f"the score table at {directory} does not match its index; rebuild the simulator")
        self._documents = documents
        self._rows: dict[str, int] = {}

    def row(self, term: str) -> int:
        """The term's row, -1 if no page holds it."""
        row = self._rows.get(term)
        if row is None:
            row = self._terms.find(term)
            if len(term) <= MAX_CACHED_TERM:
                if len(self._rows) >= ROW_CACHE:
                    self._rows.clear()
                self._rows[term] = row
        return row

    def scores(self, term: str) -> TermScores:
        """(document numbers, BM25F scores) of every page holding ``term`` (views of the map)."""
        row = self.row(term)
        if row < 0:
            return np.zeros(0, np.int32), np.zeros(0, np.float64)
        lo, hi = int(self._offsets[row]), int(self._offsets[row + 1])
        return self._docs[lo:hi], self._scores[lo:hi]

    def idf(self, term: str) -> float:
        """The body idf of ``term`` (of a term no page holds: ``log(documents) + 1``)."""
        row = self.row(term)
        return float(self._idf[row]) if row >= 0 else math.log(self._documents) + 1


def open_score_table(directory: str | Path, params: dict[str, float], documents: int) -> ScoreTable | None:
    """The table in ``directory`` when there is one computed with ``params``, else ``None``;
    a damaged one is a :class:`WikiSimError` that says to rebuild."""
    if not (Path(directory) / "meta.json").is_file():
        return None
    table = ScoreTable(directory, documents)
    return table if table.params == params else None
