"""Bounded builds and shared, memory-mapped simulators (issue 23): properties that hold
whatever the machine's memory, asserted on small real builds."""

from __future__ import annotations

import errno
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.wiki_sim.simhelpers import build_jsonl, write_jsonl
from wiki_sim import WikiSim
from wiki_sim.build import build
from wiki_sim.errors import WikiSimError
from wiki_sim.forward import ForwardIndex, build_forward_index
from wiki_sim.index import IndexSearcher, build_index, query_terms
from wiki_sim.tables import StringTable, write_string_table

WORDS = ("river mountain city empire language music science church war king island bridge railway painter novel "
         "festival harbour cathedral desert glacier volcano treaty republic dynasty orchestra theatre museum "
         "university village fortress canal").split()


def pages(n: int = 160) -> list[tuple[str, str]]:
    rng = np.random.default_rng(3)
    out = [("Glockenspiel", "A glockenspiel has tuned metal bars struck with mallets."),
           ("Sectioned page", "The lead of the page.\n\n## History\nThe history of the page, with a canal.")]
    for i in range(n):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), 60)] + [f"term{i % 37}", f"rare{i}"]
        out.append((f"Page {i}", " ".join(words) + "."))
    return out


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    return build_jsonl(tmp_path_factory.mktemp("scale"), pages())


def _all_scores(searcher: IndexSearcher, queries: list[str]) -> list[list[tuple[str, float]]]:
    out = []
    for q in queries:
        out.append([(searcher.titles[d], round(s, 9)) for d, s in searcher.candidates(query_terms(q), 20)])
    return out


QUERIES = ["river mountain", "glockenspiel metal bars", "term5 rare17 canal", "history canal", "war king dynasty"]


def test_tiny_memory_budget_gives_many_segments_and_the_same_search(wiki, tmp_path):
    info = build_index(wiki / "store.sqlite", tmp_path / "tiny", procs=2, progress=False, memory_bytes=0)
    assert info["segments"] > 2 and info["documents"] == 162  # segments closed before Whoosh's pool spills
    assert not list((tmp_path / "tiny").glob("*.tmp")) and not list((tmp_path / "tiny").rglob("*.run"))
    tiny, big = IndexSearcher(tmp_path / "tiny"), IndexSearcher(wiki / "index")
    assert len(big._segments) <= 2
    assert _all_scores(tiny, QUERIES) == _all_scores(big, QUERIES)
    assert [list(v) for v in tiny._lengths.values()] == [list(v) for v in big._lengths.values()]


def test_forward_index_in_many_chunks_equals_one_chunk(wiki, tmp_path):
    many = build_forward_index(wiki / "store.sqlite", tmp_path / "many", memory_bytes=0)
    one = build_forward_index(wiki / "store.sqlite", tmp_path / "one", memory_bytes=1 << 30)
    assert many["chunks"] > 2 and one["chunks"] == 1 and many["terms"] == one["terms"]
    for name in ("ids.i32", "offsets.i64", "vocab.bin", "vocab.off.i64", "titles.bin", "titles.off.i64"):
        assert (tmp_path / "many" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert not (tmp_path / "many" / ".chunks").exists()
    fwd = ForwardIndex(tmp_path / "many")
    assert fwd.ids(["glockenspiel", "nosuchterm", ""]) == [fwd.vocab.find("glockenspiel"), 0]


def test_string_table_round_trip_and_sorted_lookup(tmp_path):
    values = ["", "abc", "abd", "zürich", "\u4e2d\u6587"]
    write_string_table(tmp_path, "t", values)
    table = StringTable(tmp_path, "t")
    assert list(table) == values and table == values and len(table) == 5 and table[-1] == values[-1]
    assert [table.find(v) for v in values] == list(range(5)) and table.find("abe") == -1
    write_string_table(tmp_path, "empty", [])
    assert len(StringTable(tmp_path, "empty")) == 0 and StringTable(tmp_path, "empty").find("x") == -1
    with pytest.raises(IndexError):
        table[5]


def _mapped(pid: int | str, path: Path) -> list[str]:
    """The permission flags of each mapping of ``path`` in process ``pid``."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return [line.split()[1] for line in lines if line.endswith(str(path))]


def test_two_opens_share_the_memory_mapped_tables(wiki):
    with WikiSim(wiki, search_processes=0) as a, WikiSim(wiki, search_processes=0) as b:
        assert isinstance(a.index.titles, StringTable) and a.index.titles == b.index.titles
        assert a.search("glockenspiel")[0][0].title == b.search("glockenspiel")[0][0].title == "Glockenspiel"
        for path in (wiki / "terms" / "titles.bin", wiki / "terms" / "ids.i32", wiki / "index" / "lengths.i32",
                     wiki / "index" / "scores" / "scores.f64", wiki / "index" / "scores" / "docs.i32"):
            flags = _mapped("self", path)
            # one read-only shared file mapping per open: the pages are the page cache's, not copies
            assert len(flags) >= 2 and all(f.startswith("r") and f.endswith("s") and "w" not in f for f in flags)
        child = subprocess.run(
            [sys.executable, "-c", "import sys; from wiki_sim import WikiSim; s = WikiSim(sys.argv[1], "
             "search_processes=0); print(s.search('glockenspiel')[0][0].title); "
             "print(open('/proc/self/maps').read().count(sys.argv[1] + '/terms/titles.bin'))", str(wiki)],
            capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=120)
        assert child.stdout.split() == ["Glockenspiel", "1"], child.stderr[-500:]


def test_term_cache_is_bounded_in_bytes_and_answers_the_same(wiki, tmp_path):
    import shutil

    from wiki_sim.score_table import SCORES_DIR

    # The term cache serves indexes without a score table (built before it, or other scoring parameters).
    plain = tmp_path / "index"
    shutil.copytree(wiki / "index", plain, ignore=shutil.ignore_patterns(SCORES_DIR))
    bounded = IndexSearcher(plain, max_cache_bytes=3000)
    free = IndexSearcher(plain)
    assert not bounded.has_score_table and IndexSearcher(wiki / "index").has_score_table
    terms = [t for q in QUERIES for t in query_terms(q)] + [f"rare{i}" for i in range(40)]
    for term in terms * 2:
        a, b = bounded.term_scores(term), free.term_scores(term)
        assert np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1])
        assert bounded.cache_bytes <= 3000
        assert bounded.cache_bytes == sum(i.nbytes + s.nbytes + 400 for i, s in bounded._terms.values())
    assert 0 < len(bounded._terms) < len(set(terms)) <= len(free._terms)
    with pytest.raises(ValueError, match="max_cache_bytes"):
        IndexSearcher(wiki / "index", max_cache_bytes=-1)
    with pytest.raises(ValueError, match="term_cache_bytes"):
        WikiSim(wiki, term_cache_bytes=-5)
    with WikiSim(wiki, search_processes=0, term_cache_bytes=2000) as sim:
        sim.search(["river mountain city", "war king"])
        assert sim.index.max_cache_bytes == 2000 and sim.index.cache_bytes == 0  # the score table's, mapped


def test_text_is_stored_once(wiki):
    conn = sqlite3.connect(wiki / "store.sqlite")
    nulls, total = conn.execute("SELECT SUM(lead IS NULL), COUNT(*) FROM pages").fetchone()
    assert nulls == total - 1  # every page but the one with a section stores its text once
    with WikiSim(wiki, search_processes=0) as sim:
        page = sim.page("Glockenspiel")
        assert page["lead"] == page["text"] == "A glockenspiel has tuned metal bars struck with mallets."
        assert sim.page("Sectioned page")["lead"] == "The lead of the page."
        assert dict(sim.iter_leads())["Glockenspiel"] == page["text"]


def _fail_on_ids(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return build_jsonl(tmp_path_factory.mktemp("atomic"), pages(20), workers=1)


@pytest.mark.parametrize("failure", ["disk", "memory", "writer-disk"])
def test_out_of_disk_or_memory_says_so_and_keeps_the_previous_simulator(small, tmp_path, monkeypatch, failure):
    import shutil

    out = tmp_path / "wiki"
    shutil.copytree(small, out)
    before = json.loads((out / "build.json").read_text())
    corpus = write_jsonl(tmp_path / "bigger.jsonl", pages(30))
    if failure == "disk":
        monkeypatch.setattr("wiki_sim.tables.ArrayWriter.extend", _fail_on_ids)
    elif failure == "memory":
        def no_memory(*args, **kwargs):
            raise MemoryError()
        monkeypatch.setattr("wiki_sim.build.build_forward_index", no_memory)
    else:  # what an index writer process reports when its disk fills
        def writer_full(*args, **kwargs):
            raise WikiSimError("index writer failed: no space left on device")
        monkeypatch.setattr("wiki_sim.build.build_engine_index", writer_full)
    with pytest.raises(WikiSimError) as err:
        build("jsonl", corpus, out, progress=False, memory_mb=None if failure != "memory" else 300, workers=1)
    message = str(err.value)
    assert "\n" not in message and f"the simulator at {out} is unchanged" in message
    assert ("disk space" in message) if failure != "memory" else ("out of memory" in message and "300" in message)
    assert json.loads((out / "build.json").read_text()) == before
    assert not [p for p in tmp_path.iterdir() if ".building-" in p.name]
    with WikiSim(out, search_processes=0) as sim:
        assert sim.stats()["pages"] == 22 and sim.search("glockenspiel")[0][0].title == "Glockenspiel"


def test_cli_memory_budget_is_validated_and_recorded(wiki, tmp_path):
    from wiki_sim.cli import BuildConfig

    with pytest.raises(ValueError, match="--memory-mb must be an integer >= 256"):
        BuildConfig(out=str(tmp_path / "w"), memory_mb=10)
    assert BuildConfig(out=str(tmp_path / "w"), memory_mb=300).memory_mb == 300
    assert json.loads((wiki / "build.json").read_text())["memory_mb"] >= 1024  # 1024 above the caller's own


def test_a_budget_smaller_than_the_build_needs_says_so(small, tmp_path):
    import shutil

    out = tmp_path / "wiki"
    shutil.copytree(small, out)
    corpus = write_jsonl(tmp_path / "c.jsonl", pages(12))
    with pytest.raises(WikiSimError) as err:
        build("jsonl", corpus, out, progress=False, memory_mb=40, workers=1)
    message = str(err.value)
    assert "\n" not in message and "out of memory budget" in message and "--memory-mb 40 is too small" in message
    assert f"the simulator at {out} is unchanged" in message and "give at least" in message
    with WikiSim(out, search_processes=0) as sim:
        assert sim.stats()["pages"] == 22


def test_an_old_format_simulator_is_refused_with_the_rebuild_command(wiki, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(wiki, old)
    info = json.loads((old / "build.json").read_text())
    (old / "build.json").write_text(json.dumps({**info, "format": 3}))
    with pytest.raises(WikiSimError, match=r"format 3.*bash setup_wiki.sh.*wiki build"):
        WikiSim(old)


def test_release_free_memory_gives_freed_heap_back():
    """Freed C-heap memory below a live allocation stays resident until it is trimmed."""
    import subprocess
    import sys

    code = """
import numpy as np
from wiki_sim.budget import release_free_memory, resident_bytes
blocks = [np.ones(64 * 1024 // 8) for _ in range(2000)]  # 128 MB of heap chunks (under the mmap threshold)
keep = np.ones(64 * 1024 // 8)  # a live chunk above them: free() alone cannot shrink the heap
before = resident_bytes()
del blocks
freed = resident_bytes()
assert release_free_memory()
print(before >> 20, freed >> 20, resident_bytes() >> 20)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before, freed, trimmed = map(int, out)
    assert freed - trimmed >= 64, (before, freed, trimmed)
