"""What a process that opens a simulator holds privately (issue 23, one copy per machine):
segment files read in place, caches bounded in bytes, per-query work sized by the query."""

from __future__ import annotations

import io
import pickle
import random
import tracemalloc

import numpy as np
import pytest

from tests.wiki_sim.simhelpers import ENGINES, build_jsonl
from wiki_sim import WikiSim
from wiki_sim.index import IndexSearcher, query_terms
from wiki_sim.search import proximity, rerank
from wiki_sim.tantivy_index import df_entry_bytes
from wiki_sim.term_cache import TermCache
from wiki_sim.whoosh_mmap import MappedBufferFile, MemoryReader

WORDS = ("river mountain city empire language music science church war king island bridge railway painter novel "
         "festival harbour cathedral desert glacier volcano treaty republic dynasty orchestra theatre museum").split()


def pages(n: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(5)
    return [(f"Page {i}", " ".join([WORDS[j] for j in rng.integers(0, len(WORDS), 80)] + [f"rare{i}", f"term{i % 53}"]))
            for i in range(n)]


@pytest.fixture(scope="module")
def wikis(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving")
    return {engine: build_jsonl(root, pages(1500), name=engine, engine=engine) for engine in ENGINES}


def test_term_cache_keeps_the_most_recent_entries_within_its_bytes():
    evicted = []
    cache = TermCache(100, on_evict=evicted.append)
    for i in range(10):
        assert cache.put(f"t{i}", i, 30)
        assert cache.bytes <= 100
    assert len(cache) == 3 and cache.bytes == 90 and evicted == [f"t{i}" for i in range(7)]
    assert cache.get("t7") == 7  # now the most recently used: t8 goes first
    cache.put("t10", 10, 30)
    assert "t8" not in cache and "t7" in cache and list(cache.values()) == [9, 7, 10]
    assert not cache.put("huge", 0, 101) and "huge" not in cache and len(cache) == 3
    with pytest.raises(ValueError, match="max_cache_bytes"):
        TermCache(-1)


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engines_term_cache_filled_past_its_byte_bound_answers_the_same(wikis, engine, tmp_path):
    queries = [f"rare{i} term{i % 53} {WORDS[i % len(WORDS)]}" for i in range(0, 1500, 7)]
    bound = 6000 if engine == "whoosh" else 3000
    wiki = wikis[engine]
    if engine == "whoosh":  # the Whoosh engine caches terms only where its build has no score table
        import shutil

        from wiki_sim.score_table import SCORES_DIR

        wiki = tmp_path / "wiki"
        shutil.copytree(wikis[engine], wiki, ignore=shutil.ignore_patterns(SCORES_DIR))
    with WikiSim(wiki, cache_size=0, search_processes=0, term_cache_bytes=bound) as small, \
            WikiSim(wiki, cache_size=0, search_processes=0) as free:
        for query in queries:
            assert small.search([query]) == free.search([query])
            assert 0 < small.index.cache_bytes <= bound == small.index.max_cache_bytes
        distinct = {t for q in queries for t in query_terms(q)}
        assert len(small.index._terms if engine == "whoosh" else small.index._df) < len(distinct)
        if engine == "tantivy":  # counted as it is measured: the term's string and the entry around it
            assert small.index.cache_bytes == sum(df_entry_bytes(t) for t in distinct if t in small.index._df)
            assert free.index.cache_bytes == sum(df_entry_bytes(t) for t in distinct)


class HugeVocabulary:
    """A forward index whose term ids run to a billion: a vocabulary-sized array per query
    would take a gigabyte."""

    IDS = {"alpha": 999_999_001, "beta": 999_999_002, "gamma": 999_999_003, "delta": 17}

    def __init__(self, sequences: dict[int, list[int]]):
        self.sequences = {d: np.array(s, dtype=np.int32) for d, s in sequences.items()}

    def vocabulary_size(self) -> int:
        return 1_000_000_000

    def ids(self, terms: list[str]) -> list[int]:
        return [self.IDS[t] for t in terms if t in self.IDS]

    def sequence(self, docnum: int, title: str = "", text: str = "") -> np.ndarray:
        return self.sequences[docnum]


def test_rerank_works_in_the_query_and_candidates_not_the_vocabulary():
    a, b, g, d = (HugeVocabulary.IDS[t] for t in ("alpha", "beta", "gamma", "delta"))
    forward = HugeVocabulary({0: [5, 0, 7, a, 8, b, 9],  # alpha and beta apart: no pair
                              1: [5, 0, a, b, 7],  # one pair of two possible
                              2: [5, 0, a, g, b, a, g],  # alpha-gamma and gamma-beta (and again): both
                              3: [5, 0, d, d, a]})
    titles = ["Zero", "One", "Two", "Three"]
    candidates = [(0, 3.0), (1, 2.0), (2, 1.0), (3, 0.5)]
    tracemalloc.start()
    try:
        ranked = rerank(candidates, titles, forward, {}, ["alpha", "beta", "gamma"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # a vocabulary-sized boolean array alone would be 1e9 bytes
    assert ranked == [(0, 3.0), (1, 2.0 + 3.0 * 0.5 * 0.5), (2, 1.0 + 3.0 * 0.5), (3, 0.5)]
    np.testing.assert_array_equal(
        proximity([forward.sequence(i) for i in range(4)], np.array([a, b, g]), 3), [0.0, 0.5, 1.0, 0.0])


def test_memory_reader_reads_as_bytesio_does():
    rng = random.Random(3)
    data = bytes(rng.choice(b"ab\ncd\x00\xff") for _ in range(5000))
    ours, ref = MemoryReader(memoryview(data)), io.BytesIO(data)
    for _ in range(400):
        op = rng.choice(["read", "readline", "seek", "readinto", "readall"])
        if op == "read":
            n = rng.randint(-1, 900)
            assert ours.read(n) == ref.read(n)
        elif op == "readline":
            n = rng.choice([-1, rng.randint(0, 600)])
            assert ours.readline(n) == ref.readline(n)
        elif op == "seek":
            pos, whence = rng.randint(0, 5200), rng.choice([0, 1, 2])
            pos = pos if whence == 0 else pos - 2600
            if (ref.tell() if whence == 1 else 0 if whence == 0 else len(data)) + pos >= 0:
                assert ours.seek(pos, whence) == ref.seek(pos, whence)
        elif op == "readinto":
            x, y = bytearray(rng.randint(0, 300)), None
            y = bytearray(len(x))
            assert ours.readinto(x) == ref.readinto(y) and x == y
        else:
            ours.seek(0), ref.seek(0)
            assert list(ours) == list(ref)
        assert ours.tell() == ref.tell()
    blob = pickle.dumps({"a": [1, 2, 3], "b": "x" * 1000}, protocol=2)
    assert pickle.load(MemoryReader(memoryview(blob))) == pickle.loads(blob)


def test_whoosh_segment_files_are_read_in_place_not_copied(wikis):
    index_dir = wikis["whoosh"] / "index"
    segment_bytes = sum(p.stat().st_size for p in index_dir.glob("*.seg"))
    tracemalloc.start()
    try:
        searcher = IndexSearcher(index_dir)
        opened = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    for seg, _ in searcher._segments:
        assert isinstance(seg._terms._postfile, MappedBufferFile)
    assert segment_bytes > 400_000 and opened < segment_bytes / 4  # a copy would hold them all
    assert searcher.candidates(["rare7"], 5)[0][0] == 7
    searcher.close()
