"""The reply cache: hits within and across processes, keys by body, expiry per source, bad
replies dropped, and API keys kept out of the cache file, logs, errors and info."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from urllib.parse import quote

import pytest
import requests_cache

from envs.live.cache import cache_files, cached_session, integrity_check, open_cache
from envs.live.redact import register_secret
from envs.tools.search import LiveSearchTool
from envs.tools.visit import LiveVisitTool
from tests.envs.live.support import KEYS, config_for
from tests.envs.live.workers import run_processes


def _db_bytes(path) -> bytes:
    return b"".join(p.read_bytes() for p in cache_files(path))


def _leaks(blob: bytes) -> list[str]:
    found = []
    for name, key in KEYS.items():
        for form in {key, quote(key), key.upper(), key.lower()}:
            if form.encode() in blob:
                found.append(name)
    return found


def test_hits_are_served_without_a_request(make_live, fakeweb):
    live = make_live()
    tool = LiveSearchTool(live)
    first = tool({"query": [fakeweb.docs[0].title]})
    second = tool({"query": [fakeweb.docs[0].title]})
    assert not first.metadata["cache_hit"] and second.metadata["cache_hit"]
    assert second.text == first.text and len(fakeweb.requests("serper")) == 1


def test_post_bodies_are_part_of_the_key(make_live, fakeweb, tmp_path):
    live = make_live()
    for q in (fakeweb.docs[0].title, fakeweb.docs[1].title, fakeweb.docs[0].title):
        live.search(q)
    assert len(fakeweb.requests("serper")) == 2  # two bodies, two entries; the third call hit
    assert live.transport.cache.responses.count() == 2


def test_cache_hits_take_no_rate_limit_slot(make_live, fakeweb, tmp_path):
    live = make_live()
    live.search(fakeweb.docs[0].title)
    state = tmp_path / "limits" / "serper.rate"
    before = state.read_bytes()
    for _ in range(5):
        assert live.search(fakeweb.docs[0].title).cache_hit
    assert state.read_bytes() == before


def test_expiry_per_source(make_live, fakeweb):
    live = make_live(cache_expiry={"serper": 0, "wikipedia": 1})
    live.search(fakeweb.docs[0].title)
    assert not live.search(fakeweb.docs[0].title).cache_hit  # 0: never cached
    assert len(fakeweb.requests("serper")) == 2
    wiki = make_live(search_sources=("wikipedia",), cache_expiry={"wikipedia": 1})
    wiki.search(fakeweb.docs[1].title)
    assert wiki.search(fakeweb.docs[1].title).cache_hit
    time.sleep(1.2)
    assert not wiki.search(fakeweb.docs[1].title).cache_hit  # expired after 1 s
    assert len(fakeweb.requests("wikipedia")) == 2


@pytest.mark.parametrize("fault", ["malformed_json", "html_error"])
def test_unparsable_replies_are_not_kept(make_live, fakeweb, fault):
    live = make_live()
    fakeweb.faults.fail_next("serper", fault)
    assert live.search(fakeweb.docs[0].title).retries == 1  # the retry went to the server, not the cache
    assert len(fakeweb.requests("serper")) == 2
    assert live.search(fakeweb.docs[0].title).cache_hit  # and the good reply is what stayed


def test_cache_hits_across_processes(fakeweb, tmp_path):
    fields = asdict(config_for(fakeweb, tmp_path))
    queries = [d.title for d in fakeweb.docs[:6]]
    first = run_processes([fields], [queries])[0]
    second = run_processes([fields], [queries])[0]
    assert [m["cache_hit"] for m in first] == [False] * 6
    assert [m["cache_hit"] for m in second] == [True] * 6
    assert [m["source"] for m in second] == ["serper"] * 6
    assert len(fakeweb.requests("serper")) == 6
    assert integrity_check(tmp_path / "cache.sqlite") == "ok"


def test_no_key_in_the_cache_file_logs_errors_or_info(make_live, fakeweb, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    live = make_live(search_sources=("serper", "serpapi", "wikipedia"))
    search, scholar, visit = LiveSearchTool(live), LiveSearchTool(live, scholar=True), LiveVisitTool(live)
    results = [search({"query": [fakeweb.docs[0].title]})]
    fakeweb.faults.fail_next("serper", "auth")  # serper set aside: serpapi (key in the URL) answers
    results.append(search({"query": [fakeweb.docs[1].title]}))
    results.append(scholar({"query": [fakeweb.docs[2].title]}))
    results.append(visit({"url": fakeweb.page_url("doc-3"), "goal": "who founded it"}))  # jina + summarizer keys
    fakeweb.faults.fail_next("summarizer", "429_retry_after")
    results.append(visit({"url": fakeweb.page_url("doc-4"), "goal": "founder"}))
    assert {r.metadata["source"] for r in results} >= {"serper", "serpapi", "serpapi_scholar", "jina"}
    assert any(r.metadata.get("summarizer") == "model" for r in results)
    blob = _db_bytes(tmp_path / "cache.sqlite")
    assert fakeweb.docs[0].title.encode() in blob and b"REDACTED" in blob  # the grep does see the replies
    assert _leaks(blob) == []
    assert _leaks(caplog.text.encode()) == [] and "api_key=REDACTED" in caplog.text  # urllib3 logged the URL
    everything = json.dumps([r.metadata for r in results]) + "".join(r.text for r in results)
    assert _leaks(everything.encode()) == []
    assert _leaks(repr(live.config).encode()) == []


def test_errors_carry_no_key(make_live, fakeweb):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    live = make_live(base_urls={"serpapi": dead, "jina": dead}, search_sources=("serpapi",), reader_sources=("jina",),
                     deadline_s=1.0)
    outcome = live.search("anything")
    read = live.read(fakeweb.page_url("doc-1"))
    text = outcome.reasons() + read.reasons() + "".join(repr(e) + str(e.__cause__) for e in outcome.errors + read.errors)
    assert "connection failed" in text and _leaks(text.encode()) == []


def test_header_spelling_does_not_decide_redaction(tmp_path):
    """requests-cache matches ignored header names case-sensitively: with its defaults a key
    sent as ``x-api-key`` is written to the file. Ours lists every spelling, and scrubs any
    registered key even under a header name nobody listed."""
    import http.server
    import threading

    class Echo(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/x"
    try:
        plain = requests_cache.CachedSession(str(tmp_path / "plain.sqlite"), backend="sqlite")
        plain.get(url, headers={"x-api-key": "lowercase-key-123456"})
        plain.close()
        assert b"lowercase-key-123456" in _db_bytes(tmp_path / "plain.sqlite")  # the hazard is real

        register_secret("unlisted-header-key-987")
        ours = cached_session(open_cache(tmp_path / "ours.sqlite"))
        ours.get(url, headers={"x-api-key": "lowercase-key-123456"})
        ours.get(url + "?b=1", headers={"X-Goog-Api-Key": "unlisted-header-key-987"})
        ours.get(url + "?api_key=param-key-555&c=1")
        ours.close()
        blob = _db_bytes(tmp_path / "ours.sqlite")
        assert b"lowercase-key-123456" not in blob and b"unlisted-header-key-987" not in blob
        assert b"param-key-555" not in blob and blob.count(b"REDACTED") >= 3
    finally:
        server.shutdown()
        server.server_close()


def test_memo_answers_in_front_of_the_sqlite_cache(make_live, fakeweb):
    live = make_live()
    live.search(fakeweb.docs[0].title)
    live.transport.cache.clear()  # the SQLite entry is gone: only the process memo can answer
    outcome = live.search(fakeweb.docs[0].title)
    assert outcome.cache_hit and outcome.source == "serper" and len(fakeweb.requests("serper")) == 1
    no_memo = make_live(memo_items=0)
    no_memo.search(fakeweb.docs[1].title)
    assert no_memo.search(fakeweb.docs[1].title).cache_hit  # from SQLite
    no_memo.transport.cache.clear()
    assert not no_memo.search(fakeweb.docs[1].title).cache_hit
    assert len(fakeweb.requests("serper")) == 3


def test_memo_bounds_and_expiry():
    from envs.live.memo import Memo

    memo = Memo(max_items=2, max_chars=400)
    memo.put("a", 1, "s", -1, 10)
    memo.put("b", 2, "s", -1, 10)
    assert memo.get("a") == (1, "s")
    memo.put("c", 3, "s", -1, 10)  # evicts the least recently used: b
    assert memo.get("b") is None and memo.get("a") and memo.get("c")
    memo.put("big", 4, "s", -1, 101)  # over a quarter of the character budget: not kept
    assert memo.get("big") is None
    memo.put("gone", 5, "s", 0.05, 1)
    memo.put("never", 6, "s", 0, 1)
    assert memo.get("gone") and memo.get("never") is None
    time.sleep(0.06)
    assert memo.get("gone") is None


def test_a_forked_child_reopens_the_cache_and_limiter(make_live, fakeweb):
    import os

    live = make_live(search_sources=("wikipedia",))
    assert live.search(fakeweb.docs[0].title).ok
    pid = os.fork()
    if pid == 0:  # the child: its own SQLite connection and limiter files, then exit at once
        outcome = live.search(fakeweb.docs[1].title)
        os._exit(0 if outcome.ok and not outcome.cache_hit else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    live.memo.clear()
    assert live.search(fakeweb.docs[1].title).cache_hit  # the child's reply is in the shared file


class _Planted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("planted", ["pickle", "foreign-json", "nested-json", "garbage"])
def test_a_planted_row_is_a_miss_and_runs_nothing(make_live, fakeweb, tmp_path, planted):
    """The cache folder is shared: a row another process planted is never unpickled."""
    import pickle
    import sqlite3

    marker = tmp_path / "ran"
    live = make_live()
    title = fakeweb.docs[0].title
    assert not live.search(title).cache_hit
    value = {"pickle": pickle.dumps(_Planted(marker)), "foreign-json": b'{"format": "other", "reply": {}}',
             "nested-json": b"[" * 100_000 + b"]" * 100_000, "garbage": b"\x80\x05junk"}[planted]
    db = live.transport.cache.responses.db_path
    with sqlite3.connect(str(db)) as con:
        assert con.execute("UPDATE responses SET value = ?", (value,)).rowcount == 1
    other = make_live()  # another process: its in-memory memo is empty, the file is shared
    assert not other.search(title).cache_hit and len(fakeweb.requests("serper")) == 2  # fetched again
    assert not marker.exists()
    assert make_live().search(title).cache_hit  # the fresh reply replaced the planted row


def test_records_are_tagged_json(make_live, fakeweb):
    import sqlite3

    from envs.live.cache import RECORD_FORMAT

    live = make_live()
    live.search(fakeweb.docs[0].title)
    with sqlite3.connect(str(live.transport.cache.responses.db_path)) as con:
        (value,) = con.execute("SELECT value FROM responses").fetchone()
    assert json.loads(value)["format"] == RECORD_FORMAT
