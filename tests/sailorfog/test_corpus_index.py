"""The corpus index on disk: the same answers as the in-memory one, written once per simulator."""

from __future__ import annotations

import random

import pytest

from sailorfog import corpus_index
from sailorfog.corpus import index_from_sim, initials
from sailorfog.corpus_index import INDEX_DIR, DiskCorpusIndex, open_corpus_index
from sailorfog.research import answer_order
from tests.sailorfog.corpus_fixture import PAGES as TOY_PAGES
from tests.wiki_sim.simhelpers import build_jsonl
from tests.wiki_sim.test_search import PAGES as SEARCH_PAGES
from wiki_sim import WikiSim

PAGES = TOY_PAGES + SEARCH_PAGES + [
    ("Ana Ruiz (painter)", "Ana Ruiz is a Spanish painter born in 1950 who lived in Tarnis from 1971 to 1980."),
    ("Ana Ruiz (athlete)", "Ana Ruiz is a Spanish athlete born in 1988; she ran 400 metres in 51.2 seconds."),
    ("Été", "Été is a French film of 1999 set on the Gellan coast."),
]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    wiki = build_jsonl(tmp_path_factory.mktemp("corpus-index"), PAGES)
    with WikiSim(wiki) as sim:
        memory = index_from_sim(sim)
        disk = open_corpus_index(sim)
    assert disk.path == wiki / INDEX_DIR
    return wiki, memory, disk


def test_every_page_feature_is_the_same(both):
    _, a, b = both
    assert len(a) == len(b) == len(PAGES)
    for p, title in enumerate(a.titles):
        assert b.titles[p] == title and b.ids[title] == a.ids[title] == p and title in b.ids
        assert (b.page_years[p], b.page_min_year[p], b.neighbors[p], b.page_type[p], b.inbound[p]) == \
               (a.page_years[p], a.page_min_year[p], a.neighbors[p], a.page_type[p], a.inbound[p])
    assert b.ids.get("No such page") is None and "No such page" not in b.ids
    assert any(a.neighbors[p] for p in range(len(a))) and any(a.page_years[p] for p in range(len(a)))
    assert b.linked() == a.linked() and b.with_person() == a.with_person() and b.everything() == a.everything()
    assert answer_order(b, 3) == answer_order(a, 3)


def test_every_candidate_set_is_the_same(both):
    _, a, b = both
    rng = random.Random(1)
    words, desc, types = sorted(a.word_pages), sorted(a.desc_pages), sorted(a.type_pages)
    for _ in range(300):
        ws = rng.sample(words, rng.randint(1, 3)) + (["zzqx"] if rng.random() < 0.1 else [])
        assert b.with_words(ws) == a.with_words(ws)
        if desc:
            ds = rng.sample(desc, 1)
            assert b.with_words(ds, description=True) == a.with_words(ds, description=True)
        ts = rng.sample(types, rng.randint(1, 2))
        assert b.with_type(ts) == a.with_type(ts)
        lo = rng.randint(1400, 2000)
        hi = lo + rng.randint(0, 60)
        assert b.with_year(lo, hi) == a.with_year(lo, hi)
        x = rng.uniform(0, 3000)
        assert b.with_number(x, x * 1.5) == a.with_number(x, x * 1.5)
        title = a.titles[rng.randrange(len(a))]
        for k in (0, 1, 2, 4):
            assert b.with_prefix(title[:k]) == a.with_prefix(title[:k])
        assert b.with_initials(initials(title)) == a.with_initials(initials(title))
        n = rng.randint(0, 4)
        assert b.with_name_words(n) == a.with_name_words(n)
    for key, value in list(a.fact_pages)[:200]:
        assert b.with_fact(key, value.upper()) == a.with_fact(key, value.upper())
    assert b.with_words([]) == a.with_words([]) and b.with_type([]) == a.with_type([]) == set()
    assert b.with_year(-50, 10) == a.with_year(-50, 10)


def test_written_once_then_opened(both, monkeypatch):
    wiki, _, _ = both

    def refuse(*_):
        raise AssertionError("rewritten")

    monkeypatch.setattr(corpus_index, "write_corpus_index", refuse)
    with WikiSim(wiki) as sim:
        assert isinstance(open_corpus_index(sim), DiskCorpusIndex)


def test_a_read_only_simulator_gets_its_index_in_the_cache(both, tmp_path, monkeypatch):
    wiki, a, _ = both
    monkeypatch.setenv("WEBSAILOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(corpus_index, "INDEX_DIR", "synth_index_absent")  # as if not written with the simulator
    monkeypatch.setattr(corpus_index.os, "access", lambda *_: False)
    with WikiSim(wiki) as sim:
        index = open_corpus_index(sim)
    assert tmp_path / "cache" in index.path.parents and not (wiki / "synth_index_absent").exists()
    assert index.with_words(["observatory"]) == a.with_words(["observatory"])


def test_a_damaged_index_is_rewritten(tmp_path):
    wiki = build_jsonl(tmp_path, TOY_PAGES)
    with WikiSim(wiki) as sim:
        open_corpus_index(sim)
        (wiki / INDEX_DIR / "meta.json").write_text('{"format": 0}')
        with pytest.raises(ValueError, match="format 0"):
            DiskCorpusIndex(wiki / INDEX_DIR)
        assert len(open_corpus_index(sim)) == len(TOY_PAGES)


def test_bulk_reads_match_the_per_page_reads(both):
    from sailorfog.constraints import _has_between

    _, a, b = both
    rng = random.Random(4)
    for _ in range(200):
        pages = set(rng.sample(range(len(a)), rng.randint(0, len(a))))
        support = set()
        for p in pages:
            support |= a.neighbors[p]
        assert b.neighbors_of(pages) == support
        years = sorted({y for p in pages for y in a.page_years[p]})
        assert b.years_of(pages) == years
        ref = sorted(rng.sample(range(1800, 2000), rng.randint(0, 5)))
        lo, hi = rng.randint(-30, 0), rng.randint(0, 30)
        assert b.with_year_near(pages, ref, lo, hi) == \
            {p for p in pages if any(_has_between(ref, y + lo, y + hi) for y in a.page_years[p])}
