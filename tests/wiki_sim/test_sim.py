"""WikiSim mechanics: shared use from threads, the LRU cache, look-ups, and unusable directories."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from wiki_sim import Hit, WikiSim, WikiSimError
from wiki_sim.sim import LRUCache, normalize_query

QUERIES = [
    "theory of relativity photoelectric effect", "objectivism novelist philosophy", "sixteenth president Illinois",
    "alkali metals lithium sodium reactive", "Greek philosopher student of Plato", "Anarchism stateless societies",
    "capital of Albania", "astronaut moon landing Apollo program", "oil exports Algeria independence France",
    "Academy Award best production design", "Gershwin orchestral composition Paris", "autism diagnosis children",
]


@pytest.fixture()
def sim(gensim_wiki):
    with WikiSim(gensim_wiki) as s:
        yield s


def test_search_shapes(sim):
    results = sim.search(QUERIES[:3], k=4)
    assert len(results) == 3
    for hits in results:
        assert 1 <= len(hits) <= 4
        assert all(isinstance(h, Hit) and h.url.startswith("https://en.wikipedia.org/wiki/") and h.snippet
                   for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert sim.search("objectivism novelist") == [sim.search(["objectivism novelist"])[0]]
    assert sim.search(["", "   "]) == [[], []]


def test_ranked_titles_are_the_titles_search_lists_in_its_order(gensim_wiki):
    queries = QUERIES + ["relativty photoelectic", "  Capital   of ALBANIA ", "", "zzzqqq xxyyzz"]
    with WikiSim(gensim_wiki, cache_size=0) as plain, WikiSim(gensim_wiki) as cached:
        for k in (1, 3, 10):
            expected = [[h.title for h in hits] for hits in plain.search(queries, k=k)]
            assert plain.ranked_titles(queries, k=k) == expected  # ranked in this process, no snippets
            cached.search(queries[::2], k=k)  # half of them cached first
            before = cached.stats()["search_cache"]
            assert cached.ranked_titles(queries, k=k) == expected
            after = cached.stats()["search_cache"]  # the cached half counted as hits, the rest not as misses
            assert (after["hits"] - before["hits"], after["misses"] - before["misses"]) == (
                len([q for q in queries[::2] if q.strip()]), 0)
    assert expected[0] and expected[-2] == []


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_is_rejected(sim, k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        sim.search(["x"], k=k)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        sim.ranked_titles(["x"], k=k)


def test_bad_query_type_is_rejected(sim):
    with pytest.raises(ValueError, match="must be a string"):
        sim.search([None])
    with pytest.raises(ValueError, match="must be a string"):
        sim.ranked_titles(["ok", 3])


def test_threads_share_one_simulator(gensim_wiki):
    serial = WikiSim(gensim_wiki, cache_size=0)
    expected = {q: serial.search([q], k=5)[0] for q in QUERIES}
    visits = {q: serial.visit("https://en.wikipedia.org/wiki/Albert_Einstein", q) for q in QUERIES[:4]}
    shared = WikiSim(gensim_wiki, cache_size=0)  # no cache: every call really searches

    def work(i):
        q = QUERIES[i % len(QUERIES)]
        got = shared.search([q], k=5)[0]
        v = QUERIES[i % 4]
        return q, got, v, shared.visit("https://en.wikipedia.org/wiki/Albert_Einstein", v)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(64)))
    for q, got, v, visit in results:
        assert got == expected[q]
        assert visit == visits[v]


def test_identical_queries_hit_the_cache(sim):
    first = sim.search(["Greek philosopher   student of Plato"], k=3)[0]
    info = sim.stats()["search_cache"]
    again = sim.search(["  Greek philosopher student of  Plato "], k=3)[0]
    after = sim.stats()["search_cache"]
    assert again == first
    assert after["hits"] == info["hits"] + 1 and after["misses"] == info["misses"]
    sim.search(["Greek philosopher student of Plato"], k=4)  # k is part of the key
    assert sim.stats()["search_cache"]["misses"] == after["misses"] + 1
    again.clear()  # callers may mutate what they get; the cache keeps its copy
    assert sim.search(["Greek philosopher student of Plato"], k=3)[0] == first


def test_lru_cache_evicts_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)  # evicts b, the least recently used
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.info() == {"hits": 3, "misses": 1, "size": 2, "maxsize": 2, "bytes": 0, "max_bytes": None}
    LRUCache(0).put("x", 1)


def test_lru_cache_filled_past_its_byte_bound_keeps_the_most_recent_within_it():
    cache = LRUCache(1000, max_bytes=1000, sizeof=lambda key, value: len(value))
    for i in range(50):
        cache.put(i, "x" * 90)
        assert cache.bytes <= 1000
    assert cache.info()["size"] == 11 and cache.bytes == 990
    assert cache.get(38) is None and cache.get(39) == "x" * 90 and cache.get(49) == "x" * 90
    cache.put("huge", "y" * 1001)  # larger than the whole budget: not kept, nothing evicted
    assert cache.get("huge") is None and cache.info()["size"] == 11
    with pytest.raises(ValueError, match="max_bytes"):
        LRUCache(10, max_bytes=-1)


def test_simulator_caches_stay_within_cache_bytes(gensim_wiki):
    with WikiSim(gensim_wiki, cache_bytes=20_000, search_processes=0) as sim:
        for word in ("philosopher", "river", "city", "music", "war", "king", "science", "empire", "island"):
            hits = sim.search([f"{word} history"], k=10)[0]
            for hit in hits[:3]:
                sim.visit(hit.url, f"what {word}")
            sim.ranked_titles([f"{word} {other} history" for other in ("old", "new", "great", "small")], k=10)
        stats = sim.stats()
        for name in ("search_cache", "visit_cache", "rank_cache"):
            assert 0 < stats[name]["bytes"] <= 20_000 and stats[name]["max_bytes"] == 20_000
        assert stats["search_cache"]["size"] < 9  # some were dropped for their bytes, not their count
    with pytest.raises(ValueError, match="cache_bytes"):
        WikiSim(gensim_wiki, cache_bytes=-1)


def test_normalize_query():
    assert normalize_query("  a \t b\n c ") == "a b c"


def test_visit_is_cached_and_follows_redirects(sim):
    a = sim.visit("https://en.wikipedia.org/wiki/AynRand", "novels")
    b = sim.visit("https://en.wikipedia.org/wiki/AynRand", "novels")
    assert a == b and sim.stats()["visit_cache"]["hits"] >= 1
    page, focused = sim.read("Ayn_Rand", "novels")
    assert page["title"] == "Ayn Rand" and focused.evidence
    assert sim.read("https://en.m.wikipedia.org/wiki/Ayn_Rand#Life", "x")[0]["title"] == "Ayn Rand"


def test_visit_rejects_non_strings(sim):
    with pytest.raises(ValueError, match="must be strings"):
        sim.visit(["https://en.wikipedia.org/wiki/Ayn_Rand"], "novels")


def test_lookups_for_unknown_titles(sim):
    assert sim.page("No such page") is None
    assert sim.links("No such page") == [] and sim.facts("No such page") == []
    assert sim.aliases("No such page") == []
    with pytest.raises(ValueError, match="direction"):
        sim.links("Albert Einstein", "sideways")


def test_random_pages_are_reproducible_and_filtered(sim):
    a = sim.random_pages(5, seed=3)
    assert a == sim.random_pages(5, seed=3) and len(set(a)) == 5
    rich = sim.random_pages(50, seed=1, min_links=200, min_chars=20_000)
    assert rich and all(len(sim.links(t)) >= 200 and len(sim.page(t)["text"]) >= 20_000 for t in rich)
    assert sim.random_pages(0) == []
    with pytest.raises(ValueError):
        sim.random_pages(-1)


def test_stats(sim):
    stats = sim.stats()
    assert stats["pages"] == stats["documents_indexed"] == stats["build"]["counts"]["pages"]


def test_missing_directory(tmp_path):
    with pytest.raises(WikiSimError, match="no simulator at"):
        WikiSim(tmp_path / "nope")


def test_half_built_directory(gensim_wiki, tmp_path):
    half = tmp_path / "half"
    shutil.copytree(gensim_wiki, half)
    (half / "build.json").unlink()
    with pytest.raises(WikiSimError, match="not a complete simulator"):
        WikiSim(half)


def test_corrupt_build_record(gensim_wiki, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(gensim_wiki, bad)
    (bad / "build.json").write_text("{not json")
    with pytest.raises(WikiSimError, match="unreadable"):
        WikiSim(bad)


def test_missing_index(gensim_wiki, tmp_path):
    bad = tmp_path / "noindex"
    shutil.copytree(gensim_wiki, bad)
    shutil.rmtree(bad / "index")
    with pytest.raises(WikiSimError, match="no search index"):
        WikiSim(bad)
