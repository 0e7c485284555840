"""The bulk API synthesis reads (iter_pages, iter_links with sentences, dangling links, fact
targets) on both real corpora, and the format check that makes old simulators ask for a rebuild."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from wiki_sim import LinkInfo, PageInfo, WikiSim, WikiSimError
from wiki_sim.ingest.wikitext import parse_page
from wiki_sim.records import title_to_url
from wiki_sim.sentences import locate_anchors, sentence_spans


@pytest.fixture(scope="module")
def default_sim(default_wiki):
    with WikiSim(default_wiki) as s:
        yield s


@pytest.fixture(scope="module")
def gensim_sim(gensim_wiki):
    with WikiSim(gensim_wiki) as s:
        yield s


def test_sentence_spans_and_anchor_location():
    text = "Ulm is a city. It lies on the Danube.\nEinstein was born in Ulm in 1879. Ulm has a minster."
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Ulm is a city.", "It lies on the Danube.", "Einstein was born in Ulm in 1879.", "Ulm has a minster."]
    spans = locate_anchors(text, ["Danube", "Ulm", "Ulm", "", "Berlin", "city"])
    got = [text[s:e] for s, e in spans]
    # the second "Ulm" is the one after the Danube link; "city" is found though out of order
    assert got == ["It lies on the Danube.", "Einstein was born in Ulm in 1879.", "Ulm has a minster.", "", "",
                   "Ulm is a city."]


def test_long_sentence_is_cut_to_a_window_around_the_anchor():
    text = " ".join(["word"] * 400) + " Ulm " + " ".join(["word"] * 400)
    [(s, e)] = locate_anchors(text, ["Ulm"], limit=100)
    assert e - s <= 100 and "Ulm" in text[s:e] and text[s] != " " and not text[s - 1].isalnum()


def test_wikitext_fact_targets_and_hidden_links():
    p = parse_page("Albert Einstein", "{{Main|Theory of relativity}}{{Infobox scientist\n| name = Albert Einstein\n"
                   "| birth_place = [[Ulm]], [[German Empire]]\n| field = Physics\n}}\n"
                   "'''Einstein''' was born in [[Ulm]]. He studied [[physics]].")
    assert p.facts[1][0] == "birth_place"
    assert p.fact_targets == {1: "Ulm"}  # name (0) and field (2) hold no link
    assert p.links == [("Theory of relativity", "Theory of relativity"), ("Ulm", "Ulm"),
                       ("German Empire", "German Empire"), ("Ulm", "Ulm"), ("Physics", "physics")]
    assert p.hidden_links == {0, 1, 2}  # the hatnote's and the infobox's


def _check_bulk_invariants(sim: WikiSim) -> tuple[list[PageInfo], list[LinkInfo]]:
    pages = list(sim.iter_pages())
    titles = {p.title for p in pages}
    assert len(pages) == len(titles) == sim.stats()["pages"]
    links = list(sim.iter_links())
    assert links and all(link.target in titles and link.source in titles for link in links)
    # inbound_links counts distinct other pages with a resolved link in
    sources_in: dict[str, set[str]] = {}
    for link in links:
        if link.source != link.target:
            sources_in.setdefault(link.target, set()).add(link.source)
    for p in pages:
        assert p.inbound_links == len(sources_in.get(p.title, ()))
        assert p.url == title_to_url(p.title)
    # every sentence is a piece of the source page's text that shows the anchor
    for link in links[:: max(1, len(links) // 500)]:
        if link.sentence:
            assert link.sentence in sim.page(link.source)["text"]
            assert link.anchor in link.sentence
    # dangling links name no page, and never show up among the resolved ones
    dangling = sim.dangling_links()
    assert all(d.target not in titles for d in dangling)
    return pages, links


def test_bulk_api_on_the_default_corpus(default_sim):
    pages, links = _check_bulk_invariants(default_sim)
    assert len(pages) > 9000 and len(links) > 25_000  # everyday words ("island", "thought") do not link
    by_title = {p.title: p for p in pages}
    einstein = by_title["Albert Einstein"]
    assert einstein.length == len(default_sim.page("Albert Einstein")["text"])
    assert by_title["Physics"].inbound_links > 100 > einstein.inbound_links > 0
    # lead-only corpus, links found by name: every link has its sentence
    assert all(link.sentence for link in links)
    [rel] = [x for x in default_sim.page_links("Albert Einstein") if x.target == "Theory of relativity"]
    assert rel.sentence.startswith("Albert Einstein was a German-born theoretical physicist")
    assert default_sim.dangling_links() == []  # names were matched against the corpus's own titles
    facts = default_sim.facts("Albert Einstein")
    assert facts and all(f["target"] is None for f in facts)


def test_bulk_api_on_the_gensim_dump(gensim_sim):
    pages, links = _check_bulk_invariants(gensim_sim)
    assert len(pages) > 100 and len(links) > 100
    # the dump links mostly out of the 106-page sample: dangling links kept apart
    dangling = gensim_sim.dangling_links("Albert Einstein")
    assert len(dangling) > 100
    ulm = [d.sentence for d in dangling if d.target == "Ulm"]
    assert ulm[0] == "" and any("born in Ulm" in s for s in ulm)  # the infobox's link first, then the text's
    assert not any(link.target == "Ulm" for link in gensim_sim.page_links("Albert Einstein"))
    assert len(gensim_sim.dangling_links()) > 10_000
    # repeated links to one page carry their own sentences
    aristotle = [x.sentence for x in gensim_sim.page_links("Ayn Rand") if x.target == "Aristotle"]
    assert len(aristotle) >= 2 and len(set(aristotle)) == len(aristotle)
    # infobox values that link to a page of the store keep it as the fact's target
    targeted = [(p, k, t) for p, k, _, _, t in gensim_sim.iter_facts() if t]
    assert targeted and all(gensim_sim.page(t) is not None for _, _, t in targeted)
    assert any(f["target"] for f in gensim_sim.facts(targeted[0][0]))
    # a fact linking out of the corpus has no target: birth_place = [[Ulm]]
    place = [f for f in gensim_sim.facts("Albert Einstein") if f["key"] == "birth_place"]
    assert place and place[0]["target"] is None and "Ulm" in place[0]["value"]
    counts = Counter(k for _, k, _ in targeted)
    assert sum(counts.values()) == gensim_sim.build_info["counts"]["facts_with_target"]


def test_old_format_asks_for_a_rebuild(default_wiki, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(default_wiki, old)
    info = json.loads((old / "build.json").read_text())
    (old / "build.json").write_text(json.dumps({**info, "format": 1}))
    with pytest.raises(WikiSimError, match="format 1.*rebuild"):
        WikiSim(old)


def test_old_store_asks_for_a_rebuild(default_wiki, tmp_path):
    import sqlite3

    from wiki_sim.store import Store

    path = tmp_path / "store.sqlite"
    shutil.copy(default_wiki / "store.sqlite", path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'store_format'")
    with pytest.raises(WikiSimError, match="store format 1.*rebuild"):
        Store(path)


def test_initials_and_abbreviations_end_no_sentence():
    text = ("J. R. R. Tolkien was an English writer. It ended after World War I. He lived in St. Louis. "
            "He died c. 1200. John F. Kennedy was president.")
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "J. R. R. Tolkien was an English writer.", "It ended after World War I.", "He lived in St. Louis.",
        "He died c. 1200.", "John F. Kennedy was president."]
