"""The embedded default corpus (Vital Articles leads) and the link finder that gives it links."""

from __future__ import annotations

import json

import pytest

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest import open_source
from wiki_sim.ingest.link_finder import LinkFinder


@pytest.fixture(scope="module")
def default_source():
    source = open_source("default", progress=False)
    pages = {p.title: p for p in source}
    return source, pages


def test_all_articles_with_description_and_topic(default_source):
    source, pages = default_source
    assert len(pages) == source.stats["pages"] == 10033
    assert source.meta["sha256"] == "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052"
    einstein = pages["Albert Einstein"]
    assert einstein.text.startswith("Albert Einstein was a German-born theoretical physicist")
    assert einstein.lead == einstein.text and einstein.sections == []
    assert ("description", "German-born theoretical physicist (1879–1955)", "shortdesc") in einstein.facts
    assert not any(k == "topic" for k, _, _ in einstein.facts)  # the list's "Uncategorized" bucket
    assert ("topic", "Physical sciences", "vital_articles") in pages["Photoelectric effect"].facts
    with_description = sum(any(k == "description" for k, _, _ in p.facts) for p in pages.values())
    assert with_description > 9800


def test_links_are_derived_from_titles_in_the_text(default_source):
    source, pages = default_source
    einstein = dict(pages["Albert Einstein"].links)
    assert einstein["Photoelectric effect"] == "photoelectric effect"
    assert einstein["Theory of relativity"] == "theory of relativity"  # longest match, not "Theory"
    assert "Theory" not in einstein
    assert "Albert Einstein" not in einstein  # no self links
    # Everyday words ("island", "writer", "thought") no longer link: fewer links than plain title
    # matching gave (50,654), each naming its page (benchmarks/links.py measures the precision).
    assert source.stats["links"] > 25000
    assert sum(bool(p.links) for p in pages.values()) > 0.8 * len(pages)
    for p in pages.values():
        targets = [t for t, _ in p.links]
        assert len(targets) == len(set(targets)) and all(t in pages for t in targets)
        assert len(p.link_starts) == len(p.links)
        assert all(p.text[s:s + len(a)] == a for (_, a), s in zip(p.links, p.link_starts))


def test_default_corpus_links_name_their_entities(default_source):
    """The false relations issue 17 found: everyday words and snacks no longer link."""
    _, pages = default_source
    anchors: dict[str, set[str]] = {}
    for p in pages.values():
        for target, anchor in p.links:
            anchors.setdefault(target, set()).add(anchor)
    for common in ("Thought", "Party", "Shape", "Switch", "River", "Water"):
        assert not any(a[:1].islower() for a in anchors.get(common, ())), (common, anchors.get(common))
    assert all(a[:1].isupper() for a in anchors.get("Peanuts", ()))
    assert "Berlin" in anchors and "Berlin Wall" in pages


def test_default_corpus_aliases(default_source):
    _, pages = default_source
    assert ("Rockies", "lead") in pages["Rocky Mountains"].aliases
    assert ("WTO", "lead") in pages["World Trade Organization"].aliases
    assert ("Dune", "title") in pages["Dune (novel)"].aliases


def test_link_finder_rules():
    titles = ["Mercury (planet)", "Venus", "Solar System", "Solar wind", "The Beatles", "1066",
              "Ox", "Water", "Austria", "River", "Queen (band)", "Queen (chess)", "Jupiter (mythology)"]
    finder = LinkFinder(titles)
    text = ("Mercury and Venus orbit in the Solar System, where the solar wind blows; the Beatles sang "
            "in 1066 near an ox drinking water in Austria-Hungary. "
            "The Queen met Freddie Jupiter. Venus again.")
    assert finder.find(text, "Venus") == [
        ("Mercury (planet)", "Mercury"),      # unambiguous short form of "Mercury (planet)"
        ("Solar System", "Solar System"),
        ("Solar wind", "solar wind"),          # first letter in either case
        ("The Beatles", "the Beatles"),
        ("Water", "water"),
    ]
    # "Queen" is ambiguous, "1066" a number, "Ox" too short, "Austria" glued to "-Hungary",
    # "Jupiter" (a short form) inside a longer name, "Venus" is the page itself.
    assert finder.find("by the Amazon River", "") == [("River", "River")]
    # Once "river" shows up as a common noun of the corpus, "Amazon River" is a name, not the article;
    # in more than max_df of the texts, the lower-case word is not linked at all.
    dropped = finder.drop_common_words(["a river", "the river", "one river", "no"], max_df=0.5)
    assert dropped == ["river"]
    assert finder.find("by the Amazon River and a river", "") == []
    assert finder.find("River flows.", "") == [("River", "River")]


def test_a_summaries_file_that_is_not_the_corpus(tmp_path):
    bad = tmp_path / "summaries.json"
    bad.write_text(json.dumps(["not", "a", "mapping"]))
    with pytest.raises(WikiSimError, match="expected a JSON object"):
        list(open_source("default", bad, progress=False))
    bad.write_text("{}")
    with pytest.raises(WikiSimError, match="holds no articles"):
        list(open_source("default", bad, progress=False))
    bad.write_text("{broken")
    with pytest.raises(WikiSimError, match="not the summaries JSON"):
        list(open_source("default", bad, progress=False))
