"""The XML path through the real enwiki sample shipped in the gensim wheel (206 XML pages: 106 articles)."""

from __future__ import annotations

import re

import pytest

from wiki_sim.ingest import open_source
from wiki_sim.records import Page, Redirect


@pytest.fixture(scope="module")
def sample():
    source = open_source("gensim-sample", workers=2, progress=False)
    records = list(source)
    return source, records


@pytest.fixture(scope="module")
def pages(sample):
    return {r.title: r for r in sample[1] if isinstance(r, Page)}


def test_counts_and_meta(sample):
    source, records = sample
    redirects = [r for r in records if isinstance(r, Redirect)]
    assert source.stats["pages"] == 106 and len(records) - len(redirects) == 106
    assert 0.4 < len(redirects) / 205 < 0.6  # about half of the 205 main-namespace pages
    assert source.stats["non_main_namespace"] == 1  # "Wikipedia:Adding Wikipedia articles to Nupedia"
    assert source.stats["skipped"] == 0
    assert source.meta["sha256"] == "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d"
    assert source.meta["parser"]["c_tokenizer"] is True


def test_redirects_are_records_with_normalized_targets(sample):
    redirects = {r.title: r.target for r in sample[1] if isinstance(r, Redirect)}
    assert redirects["AccessibleComputing"] == "Computer accessibility"
    assert redirects["AfghanistanHistory"] == "History of Afghanistan"


def test_known_infobox_facts(pages):
    facts = {(k, s): v for k, v, s in pages["Albert Einstein"].facts}
    src = "infobox:infobox scientist"
    assert facts[("birth_date", src)] == "14 March 1879"
    assert facts[("death_date", src)] == "18 April 1955 (aged 76)"
    assert facts[("birth_place", src)] == "Ulm, Kingdom of Württemberg, German Empire"
    assert facts[("doctoral_advisor", src)] == "Alfred Kleiner"
    assert "Nobel Prize in Physics (1921)" in facts[("awards", src)]
    assert not any(k in ("image", "caption", "signature") for k, _ in facts)
    with_infobox = [p for p in pages.values() if any(s.startswith("infobox:") for _, _, s in p.facts)]
    assert len(with_infobox) >= 45


def test_links_with_anchors(pages):
    links = pages["Albert Einstein"].links
    assert ("Hans Albert Einstein", "Hans Albert") in links
    assert ("Photon", "photons") in links  # link trail: [[photon]]s
    assert ("Theoretical physics", "theoretical physicist") not in links
    assert sum(len(p.links) for p in pages.values()) > 20000
    for p in pages.values():
        for target, anchor in p.links:
            assert anchor and target[:1] == target[:1].upper()
            assert not re.match(r"(?i)(file|image|category|portal|wikipedia|template|[a-z]{2,3}):", target), target


def test_headings_sections_and_lead(pages):
    p = pages["Albert Einstein"]
    assert p.sections[:2] == ["Biography", "Early life and education"]
    assert "\n## Biography\n\n### Early life and education\n" in p.text
    assert "References" not in p.sections and "External links" not in p.sections
    assert p.lead.startswith("Albert Einstein (14 March 1879 – 18 April 1955) was a German-born theoretical")
    assert "#" not in p.lead and p.text.startswith(p.lead)


def test_plain_text_is_clean(pages):
    assert "Longman Pronunciation Dictionary" not in pages["Albert Einstein"].text  # inside a <ref>
    for p in pages.values():
        for bad in ("{{", "}}", "[[", "]]", "<ref", "&nbsp;", "thumb|", "Category:", "<!--", "{|"):
            assert bad not in p.text, (p.title, bad)
        assert p.text.strip()


def test_one_worker_and_two_workers_give_the_same_records(sample):
    one = list(open_source("gensim-sample", workers=1, progress=False))
    assert one == sample[1]
