"""Hostile input to the simulator's API: look-alike hosts, and keys the caches must not keep."""

from __future__ import annotations

import pytest

from wiki_sim import WikiSim, url_to_title
from wiki_sim.sim import MAX_CACHED_KEY_CHARS


@pytest.mark.parametrize("url", [
    "https://evilwikipedia.org/wiki/Paris",
    "https://en.wikipedia.org.evil.com/wiki/Paris",
    "https://en.wikipedia.org@evil.com/wiki/Paris",
    "https://wikipedia.organ/wiki/Paris",
    "https://[::1/wiki/Paris",
])
def test_only_wikipedia_hosts_name_pages(url):
    assert url_to_title(url) is None


@pytest.mark.parametrize("url", [
    "https://en.wikipedia.org/wiki/Paris", "https://en.m.wikipedia.org/wiki/Paris", "http://wikipedia.org/wiki/Paris",
    "https://EN.Wikipedia.org./wiki/Paris", "https://en.wikipedia.org:443/wiki/Paris", "en.wikipedia.org/wiki/Paris",
    "/wiki/Paris", "Paris",
])
def test_wikipedia_urls_still_name_their_pages(url):
    assert url_to_title(url) == "Paris"


def test_long_goals_and_queries_are_answered_but_not_cached(gensim_wiki):
    with WikiSim(gensim_wiki, cache_size=64) as sim:
        title = sim.random_pages(1, seed=0)[0]
        url = sim.page(title)["url"]
        for i in range(5):
            goal = f"goal {i} " + "x" * MAX_CACHED_KEY_CHARS
            assert "Evidence in page" in sim.visit(url, goal)
            sim.search(["anarchism " + "y" * MAX_CACHED_KEY_CHARS + str(i)])
            sim.ranked_titles(["anarchy " + "y" * MAX_CACHED_KEY_CHARS + str(i)])
        assert sim.stats()["visit_cache"]["size"] == 0 and sim.stats()["search_cache"]["size"] == 0
        assert sim.stats()["rank_cache"]["size"] == 0
        sim.visit(url, "a short goal")
        sim.search(["anarchism"])
        assert sim.stats()["visit_cache"]["size"] == 1 and sim.stats()["search_cache"]["size"] == 1


@pytest.mark.timeout(120)
def test_a_10mb_unknown_word_gets_no_spelling_search(default_wiki):
    """An unknown word is retried with spelling tolerance only up to SUGGEST_MAX_LETTERS letters:
    the edit-distance search over the index costs time in the word's length (a 10 MB word took
    half a minute, and held every search queued behind it)."""
    from wiki_sim.search import SUGGEST_MAX_LETTERS

    with WikiSim(default_wiki, search_processes=0) as sim:
        asked: list[int] = []
        suggest = sim.searcher.engine.suggest
        sim.searcher.engine.suggest = lambda term: asked.append(len(term)) or suggest(term)
        assert list(sim.search(["q" * 10_000_000])[0]) == []
        assert asked == []
        assert sim.search(["Einstien"])[0].corrected_query == "Einstein"  # short misspellings still retried
        assert asked == [8]
        long_typo = "einstein" * (SUGGEST_MAX_LETTERS // 8 + 1)
        assert sim.search([long_typo])[0].corrected_query is None
        assert asked == [8]
