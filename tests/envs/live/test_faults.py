"""Each injected fault is handled as its kind demands: retried, waited out, or passed to the
next source; and nothing escapes as an exception."""

from __future__ import annotations

import time

import pytest

from envs.tools.search import LiveSearchTool
from envs.tools.visit import LiveVisitTool

TRANSIENT = ["429", "500", "503", "reset", "timeout", "malformed_json", "truncated", "html_error"]


@pytest.mark.parametrize("fault", TRANSIENT)
def test_transient_search_fault_is_retried_on_the_same_source(make_live, fakeweb, fault):
    live = make_live(timeouts={"serper": 0.3})
    fakeweb.faults.fail_next("serper", fault)
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.ok and outcome.source == "serper" and outcome.retries == 1 and not outcome.errors
    assert [r[2] for r in fakeweb.requests("serper")] == [fault, None]
    assert fakeweb.requests("serpapi") == []


@pytest.mark.parametrize("fault", ["500", "reset", "timeout", "truncated", "html_error", "malformed_json"])
def test_transient_reader_fault_is_retried(make_live, fakeweb, fault):
    live = make_live(timeouts={"jina": 0.3})
    fakeweb.faults.fail_next("jina", fault)
    outcome = live.read(fakeweb.page_url("doc-1"))
    assert outcome.ok and outcome.source == "jina" and outcome.retries == 1
    assert fakeweb.docs[1].fact in outcome.value.text


def test_slow_reply_within_timeout_is_just_slow(make_live, fakeweb):
    live = make_live()
    fakeweb.faults.fail_next("serper", "slow")
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.ok and outcome.retries == 0 and outcome.latency_s >= fakeweb.slow_s


def test_retry_after_is_honoured_and_shared(make_live, fakeweb):
    fakeweb.retry_after = "0.4"
    live = make_live()
    fakeweb.faults.fail_next("serper", "429_retry_after")
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.ok and outcome.retries == 1
    first, second = fakeweb.requests("serper")
    assert second[0] - first[0] >= 0.39  # backoff alone would be ~0.02 s
    # Without Retry-After the exponential backoff (here 10-20 ms) applies.
    fakeweb.clear_log()
    fakeweb.faults.fail_next("serper", "429")
    assert live.search(fakeweb.docs[1].title).ok
    first, second = fakeweb.requests("serper")
    assert second[0] - first[0] < 0.3


def test_retry_after_beyond_the_maximum_falls_back_at_once(make_live, fakeweb):
    fakeweb.retry_after = "30"
    live = make_live(retry_after_max=2.0)
    fakeweb.faults.fail_next("serper", "429_retry_after")
    start = time.time()
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.ok and outcome.source == "serpapi" and time.time() - start < 1.0
    assert len(fakeweb.requests("serper")) == 1


@pytest.mark.parametrize("fault", ["auth", "quota"])
def test_auth_and_quota_are_not_retried_and_set_the_source_aside(make_live, fakeweb, fault):
    live = make_live()
    fakeweb.faults.fail_next("serper", fault)
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.ok and outcome.source == "serpapi" and outcome.retries == 0
    assert outcome.errors[0].kind == "auth_or_quota" and len(fakeweb.requests("serper")) == 1
    # The next query does not knock on serper's door again.
    outcome = live.search(fakeweb.docs[1].title)
    assert outcome.source == "serpapi" and len(fakeweb.requests("serper")) == 1
    assert any("set aside" in s for s in outcome.skipped)


def test_provider_specific_quota_codes(make_live, fakeweb):
    live = make_live(search_sources=("serpapi", "wikipedia"))
    fakeweb.faults.fail_next("serpapi", "quota")  # SerpAPI: 429 "run out of searches" is a quota, not a rate limit
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.source == "wikipedia" and outcome.errors[0].kind == "auth_or_quota"
    assert len(fakeweb.requests("serpapi")) == 1
    fakeweb.faults.fail_next("jina", "quota")  # Jina: 402 insufficient balance
    read = live.read(fakeweb.page_url("doc-2"))
    assert read.source == "direct" and read.errors[0].kind == "auth_or_quota"


def test_wrong_key_is_an_auth_error_and_the_key_is_not_in_it(make_live, fakeweb):
    live = make_live(serper_api_key="sk-wrong-key-000111", search_sources=("serper",))
    outcome = live.search(fakeweb.docs[0].title)
    assert not outcome.ok and outcome.errors[0].kind == "auth_or_quota"
    assert "sk-wrong-key-000111" not in outcome.reasons()


def test_not_found_is_not_retried(make_live, fakeweb):
    live = make_live(reader_sources=("direct",))
    outcome = live.read(fakeweb.page_url("doc-404"))
    assert not outcome.ok and outcome.errors[0].kind == "not_found" and outcome.retries == 0
    assert len(fakeweb.requests("direct")) == 1


def test_deadline_bounds_retries_and_leaves_time_for_fallbacks(make_live, fakeweb):
    live = make_live(deadline_s=2.0, timeouts={"serper": 0.3, "serpapi": 0.3, "wikipedia": 0.3}, max_attempts=50)
    fakeweb.faults.always("serper", "timeout")
    fakeweb.faults.always("serpapi", "timeout")
    start = time.time()
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.ok and outcome.source == "wikipedia"
    assert time.time() - start < 2.0 + 0.3
    fakeweb.faults.always("wikipedia", "503")
    start = time.time()
    outcome = live.search(fakeweb.docs[1].title)
    assert not outcome.ok and time.time() - start < 2.0 + 0.6  # the deadline plus at most one read timeout
    assert {e.source for e in outcome.errors} | {s.split()[0] for s in outcome.skipped} == \
        {"serper", "serpapi", "wikipedia"}


def test_every_source_down_gives_an_error_observation_not_an_exception(make_live, fakeweb):
    live = make_live()
    for provider in ("serper", "serpapi", "wikipedia", "jina", "direct"):
        fakeweb.faults.always(provider, "503")
    result = LiveSearchTool(live)({"query": ["alpha", "beta"]})
    assert not result.ok and result.text.count("failed: no search source could answer") == 2
    assert "\n=======\n" in result.text and len(result.metadata["errors"]) == 6
    visit = LiveVisitTool(live)({"url": fakeweb.page_url("doc-1"), "goal": "founder"})
    assert not visit.ok and "could not be extracted: the page could not be read" in visit.text
    assert "server error (HTTP 503)" in visit.text


def test_unreachable_server_is_an_error_observation(make_live, tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    live = make_live(base_urls={"serper": url, "serpapi": url, "wikipedia": url}, deadline_s=1.0)
    result = LiveSearchTool(live)({"query": "anything"})
    assert not result.ok and "connection failed" in result.text


def test_a_library_crash_inside_an_adapter_becomes_a_bad_response(make_live, fakeweb, monkeypatch):
    import trafilatura

    def boom(*args, **kwargs):
        raise RuntimeError("extractor exploded")

    monkeypatch.setattr(trafilatura, "extract", boom)
    live = make_live(reader_sources=("direct",))
    outcome = live.read(fakeweb.page_url("doc-1"))
    assert not outcome.ok and outcome.errors[0].kind == "bad_response"
    assert "internal error (RuntimeError: extractor exploded)" in outcome.reasons()
    assert outcome.retries == 0  # a crash is not retried


def test_bad_arguments_are_error_observations(make_live):
    live = make_live()
    search, visit = LiveSearchTool(live), LiveVisitTool(live)
    for bad in ({}, {"query": []}, {"query": [1, 2]}, {"query": ["q"] * 11}):
        result = search(bad)
        assert not result.ok and result.text.startswith("Error:")
    assert search({"queries": "one string"}).ok  # alias and single string accepted
    for bad in ({"url": "http://x"}, {"goal": "g"}, {"url": [], "goal": "g"}, "not a dict"):
        result = visit(bad)
        assert not result.ok and result.text.startswith("Error:")
