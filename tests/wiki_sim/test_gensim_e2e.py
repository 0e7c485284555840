"""The issue's acceptance checks, through the real gensim enwiki sample (XML dump -> store -> index -> WikiSim)."""

from __future__ import annotations

import json

import pytest

from wiki_sim import WikiSim


@pytest.fixture(scope="module")
def sim(gensim_wiki):
    with WikiSim(gensim_wiki) as s:
        yield s


def test_build_record(gensim_wiki):
    info = json.loads((gensim_wiki / "build.json").read_text())
    assert info["source"]["kind"] == "gensim-sample"
    assert info["source"]["sha256"] == "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d"
    counts = info["counts"]
    assert counts["pages"] == counts["documents_indexed"] > 100
    assert counts["redirects"] > 0 and counts["links"] > 10_000 and counts["facts"] > 500
    assert set(info["versions"]) >= {"python", "whoosh", "mwparserfromhell", "sqlite", "websailor-gym"}
    assert set(info["durations_s"]) == {"parse_and_store", "finalize_store", "index", "forward_index", "total"}
    assert info["skipped"] == {"count": 0, "titles": []}


def test_known_article_infobox_facts(sim):
    facts = {(f["key"], f["value"]) for f in sim.facts("Albert Einstein")}
    assert ("birth_date", "14 March 1879") in facts
    assert ("doctoral_advisor", "Alfred Kleiner") in facts
    sources = {f["source"] for f in sim.facts("Albert Einstein")}
    assert "infobox:infobox scientist" in sources
    lincoln = {(f["key"], f["value"]) for f in sim.facts("Abraham Lincoln")}
    assert ("term_start", "March 4, 1861") in lincoln


def test_redirect_resolves_to_its_target(sim):
    assert sim.resolve("AynRand") == "Ayn Rand"
    assert sim.page("AynRand")["title"] == "Ayn Rand"
    assert "AynRand" in sim.aliases("Ayn Rand")
    visited = sim.visit("https://en.wikipedia.org/wiki/AynRand", "novels she wrote")
    assert "Atlas Shrugged" in visited


def test_link_table_is_populated(sim):
    out = sim.links("Albert Einstein", "out")
    assert len(out) > 100
    assert {"target": "Ulm", "anchor": "Ulm"} in out
    into = {link["source"] for link in sim.links("Ayn Rand", "in")}
    assert "Aristotle" in into


def test_search_finds_an_article_by_words_from_its_body(sim):
    [hits] = sim.search(["awarded the Nobel Prize for his discovery of the law of the photoelectric effect"])
    assert hits[0].title == "Albert Einstein"
    assert hits[0].url == "https://en.wikipedia.org/wiki/Albert_Einstein"
    assert "photoelectric" in hits[0].snippet


def test_snippet_comes_from_deep_inside_a_long_article(sim):
    text = sim.page("Abraham Lincoln")["text"]
    [hits] = sim.search(["Booth Ford's Theatre assassinate president"], k=3)
    top = hits[0]
    assert top.title == "Abraham Lincoln"
    assert "Ford's Theatre" in top.snippet
    assert text.index("Ford's Theatre") > 2 ** 15  # beyond Whoosh's default highlight limit


def test_visit_returns_goal_relevant_evidence(sim):
    text = sim.visit("https://en.wikipedia.org/wiki/Abraham_Lincoln", "who assassinated Lincoln")
    assert text.startswith("The useful information in https://en.wikipedia.org/wiki/Abraham_Lincoln")
    evidence = text.split("Evidence in page:", 1)[1].split("Summary:", 1)[0]
    assert "John Wilkes Booth" in evidence
    assert len(evidence) < 4000


def test_visit_unknown_url_is_a_not_found_text(sim):
    text = sim.visit("https://en.wikipedia.org/wiki/No_such_page_at_all", "anything")
    assert "page not found" in text
    assert "page not found" in sim.visit("https://example.com/x", "anything")
    assert "page not found" in sim.visit("", "anything")
