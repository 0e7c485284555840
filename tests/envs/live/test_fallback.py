"""Source order, fallback, keyless operation, and graceful degradation of the visit tool."""

from __future__ import annotations

import pytest

from envs.formatting import format_search_batch
from envs.tools.search import LiveSearchTool
from envs.tools.visit import LiveVisitTool
from wiki_sim.focus import format_not_found


def test_chain_follows_the_configured_order(make_live, fakeweb):
    live = make_live(search_sources=("wikipedia", "serper", "serpapi"))
    assert live.search(fakeweb.docs[0].title).source == "wikipedia"
    fakeweb.faults.always("wikipedia", "500")
    fakeweb.faults.always("serper", "503")
    outcome = live.search(fakeweb.docs[1].title)
    assert outcome.source == "serpapi" and [e.source for e in outcome.errors] == ["wikipedia", "serper"]
    order = [r[1] for r in fakeweb.requests()]
    assert order.index("serper") > order.index("wikipedia") and order.index("serpapi") > order.index("serper")


def test_without_any_key_search_uses_wikipedia_and_visit_reads_directly(make_live, fakeweb):
    live = make_live(serper_api_key=None, serpapi_api_key=None, jina_api_key=None, summarizer_model=None,
                     summarizer_api_key=None, reader_sources=("direct",))
    result = LiveSearchTool(live)({"query": [fakeweb.docs[0].title]})
    assert result.ok and result.metadata["source"] == "wikipedia"
    assert "serper (no API key)" in live.search(fakeweb.docs[1].title).skipped
    doc = fakeweb.docs[6]
    visit = LiveVisitTool(live)({"url": [fakeweb.page_url(doc.slug)], "goal": "who founded it and in which year"})
    assert visit.ok and doc.fact in visit.text and visit.metadata["summarizer"] == "extractive"
    assert not visit.metadata["degraded"]
    assert fakeweb.requests("serper") == [] and fakeweb.requests("summarizer") == []


def test_google_scholar_needs_a_key_and_says_so(make_live, fakeweb):
    live = make_live(serper_api_key=None, serpapi_api_key=None)
    result = LiveSearchTool(live, scholar=True)({"query": ["anything"]})
    assert not result.ok and "serper_scholar (no API key)" in result.text
    assert "serpapi_scholar (no API key)" in result.text


def test_search_output_is_exactly_the_simulator_format(make_live, fakeweb):
    live = make_live()
    queries = [fakeweb.docs[0].title, fakeweb.docs[9].title]
    result = LiveSearchTool(live)({"query": queries})
    hits = [live.search(q).value for q in queries]  # now cached: same hits
    assert result.text == format_search_batch(queries, hits)


def test_visit_with_the_model_summarizer(make_live, fakeweb):
    live = make_live()
    doc = fakeweb.docs[8]
    result = LiveVisitTool(live)({"url": fakeweb.page_url(doc.slug), "goal": "who founded it"})
    assert result.ok and result.metadata["summarizer"] == "model" and not result.metadata["degraded"]
    assert result.text.startswith(f"The useful information in {fakeweb.page_url(doc.slug)} for user goal who founded it as follows:")
    assert "Summary: \n(model)" in result.text and doc.fact in result.text


@pytest.mark.parametrize("fault", ["quota", "auth", "malformed_json", "500"])
def test_summarizer_failure_degrades_to_extractive_evidence_and_says_so(make_live, fakeweb, fault):
    live = make_live(max_attempts=2)
    fakeweb.faults.always("summarizer", fault)
    doc = fakeweb.docs[10]
    result = LiveVisitTool(live)({"url": fakeweb.page_url(doc.slug), "goal": "who founded it"})
    assert result.ok and result.metadata["degraded"] and result.metadata["summarizer"] == "extractive"
    assert "summarizer failed" in result.metadata["degraded_reasons"][0]
    assert doc.fact in result.text and "(model)" not in result.text


def test_reader_fallback_and_not_found(make_live, fakeweb):
    live = make_live()
    fakeweb.faults.always("jina", "503")
    doc = fakeweb.docs[11]
    result = LiveVisitTool(live)({"url": [fakeweb.page_url(doc.slug), fakeweb.page_url("doc-777")],
                                  "goal": "who founded it"})
    first, second = result.text.split("\n=======\n")
    assert doc.fact in first and result.metadata["fallback"] and result.metadata["sources"] == ["direct"]
    assert "could not be read" in second and not result.ok
    fakeweb.faults.always("jina", None)
    missing = LiveVisitTool(live)({"url": fakeweb.page_url("doc-778"), "goal": "g"})
    # Jina cannot load it (422) and the site says 404: the simulator's not-found text.
    assert missing.text == format_not_found(fakeweb.page_url("doc-778"))
