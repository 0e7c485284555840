"""Bounded downloads and a cache that one reply cannot freeze: decompression bombs, huge and
dribbling bodies, a cache write that fails, a missing reader dependency, no network."""

from __future__ import annotations

import gzip
import socket
import sqlite3
import subprocess
import sys
import time
import tracemalloc
import zlib

import pytest

from envs.live.body import read_capped
from envs.live.cache import cache_files, open_cache
from envs.liveweb import make_liveweb_env
from envs.live.errors import TooLarge
from envs.live.hostile import gzip_bomb
from envs.tools.search import LiveSearchTool
from envs.tools.visit import LiveVisitTool
from tests.envs.live.support import config_for

MIB = 1 << 20


def _visit(live, url):
    return LiveVisitTool(live)({"url": [url], "goal": "who founded it"})


def _cached_urls(path) -> list[str]:
    """The URLs of every reply in the cache database (read by a fresh connection)."""
    cache = open_cache(path)
    try:
        return [r.url for r in cache.filter(valid=True, expired=True)]
    finally:
        cache.close()


def _chunks(data: bytes, size: int = 4096):
    return (data[i:i + size] for i in range(0, len(data), size))


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_read_capped_stops_a_bomb_at_the_cap(encoding):
    plain = b"<p>" + b"\0" * (64 * MIB)
    if encoding == "gzip":
        body = gzip.compress(plain, 9)
    else:
        c = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS if encoding == "deflate" else -zlib.MAX_WBITS)
        body = c.compress(plain) + c.flush()
    assert len(body) < MIB
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match="after decompression"):
            read_capped("direct", _chunks(body), "deflate" if "deflate" in encoding else "gzip", MIB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB  # never near the 64 MiB it inflates to
    small = gzip.compress(b"hello " * 1000) + gzip.compress(b"world")  # two gzip members
    assert read_capped("direct", _chunks(small, 7), "gzip", MIB) == b"hello " * 1000 + b"world"


def test_read_capped_counts_raw_bytes_and_refuses_other_encodings():
    with pytest.raises(TooLarge):
        read_capped("direct", _chunks(b"x" * (MIB + 1)), "identity", MIB)
    assert read_capped("direct", _chunks(b"x" * MIB), "", MIB) == b"x" * MIB
    with pytest.raises(Exception, match="unsupported Content-Encoding"):
        read_capped("direct", _chunks(b"x"), "br", MIB)


def test_a_gzip_bomb_is_refused_quickly_and_nothing_is_cached(make_live, fakeweb, tmp_path):
    gzip_bomb(256)  # built once, before the clock starts (the server would take longer than a read timeout)
    live = make_live(reader_sources=("direct",), max_page_bytes=2 * MIB)
    start = time.time()
    result = _visit(live, f"{fakeweb.url}/hostile/bomb?mib=256")
    assert time.time() - start < 3.0
    assert not result.ok and "larger than the limit of 2097152 bytes" in result.text and "decompression" in result.text
    assert "too large to read" in result.text and "Try again later" not in result.text
    assert not any("hostile" in u for u in _cached_urls(tmp_path / "cache.sqlite"))
    assert sum(p.stat().st_size for p in cache_files(tmp_path / "cache.sqlite")) < MIB
    assert _visit(live, fakeweb.page_url("doc-0")).ok  # the cache is still usable


@pytest.mark.parametrize("length", ["1", "0"])
def test_a_huge_body_stops_at_the_cap(make_live, fakeweb, tmp_path, length):
    live = make_live(reader_sources=("direct",), max_page_bytes=MIB, deadline_s=20.0)
    start = time.time()
    result = _visit(live, f"{fakeweb.url}/hostile/huge?mib=200&length={length}")
    assert time.time() - start < 5.0
    assert not result.ok and "over the limit" in result.text or "larger than the limit" in result.text
    assert _cached_urls(tmp_path / "cache.sqlite") == []


@pytest.mark.parametrize("route", ["dribble?n=200&every=0.2", "dribble_headers?every=0.2"])
def test_a_dribbling_server_gets_a_total_deadline_not_one_per_read(make_live, fakeweb, route):
    # Each byte comes well within the 1 s read timeout; only a total deadline stops this.
    live = make_live(reader_sources=("direct",), deadline_s=1.5, timeouts={"direct": 1.0}, max_attempts=1)
    start = time.time()
    result = _visit(live, f"{fakeweb.url}/hostile/{route}")
    assert time.time() - start < 3.0
    assert not result.ok and "deadline" in result.text


@pytest.mark.timeout(90)  # without the rollback this hangs: the next write spins forever
def test_a_failing_cache_write_rolls_back_and_other_processes_still_write(make_live, fakeweb, tmp_path):
    """requests-cache used to leave BEGIN IMMEDIATE open on a DataError: every other writer spun."""
    live = make_live(reader_sources=("direct",))
    db = tmp_path / "cache.sqlite"
    assert _visit(live, fakeweb.page_url("doc-0")).ok  # opens this thread's connection
    responses = live.transport.cache.responses
    with responses.connection() as con:
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 200)  # this process now fails to write any reply
    result = _visit(live, fakeweb.page_url("doc-5"))
    assert result.ok and fakeweb.docs[5].fact in result.text  # answered, just not cached
    assert any(u.endswith("/doc-0") for u in _cached_urls(db)) and not any(u.endswith("/doc-5") for u in _cached_urls(db))
    writer = ("import sqlite3, sys, time\n"
              "con = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)\n"
              "start = time.time(); con.execute('BEGIN IMMEDIATE')\n"
              "con.execute(\"INSERT OR REPLACE INTO responses (key, value, expires) VALUES ('other', x'00', NULL)\")\n"
              "con.execute('COMMIT'); print(round(time.time() - start, 3))\n")
    done = subprocess.run([sys.executable, "-c", writer, str(db)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 2.0
    with sqlite3.connect(str(db)) as con:
        assert con.execute("SELECT count(*) FROM responses WHERE key = 'other'").fetchone()[0] == 1
        con.execute("DELETE FROM responses WHERE key = 'other'")
    with responses.connection() as con:
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000_000)
    assert _visit(live, fakeweb.page_url("doc-6")).ok
    assert any(u.endswith("/doc-6") for u in _cached_urls(db))  # and this process writes again


def test_a_missing_reader_dependency_says_what_to_install(make_live, fakeweb, monkeypatch):
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # import trafilatura -> ImportError
    monkeypatch.setitem(sys.modules, "pypdf", None)
    live = make_live(reader_sources=("direct",))
    html = _visit(live, fakeweb.page_url("doc-0"))
    assert not html.ok and "pip install trafilatura" in html.text and "internal error" not in html.text
    pdf = _visit(live, fakeweb.page_url("doc-0", ".pdf"))
    assert not pdf.ok and "pip install pypdf" in pdf.text


@pytest.fixture
def no_network(monkeypatch):
    """Every name except the loopback address fails to resolve, as with no network."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host in ("127.0.0.1", "localhost"):
            return real(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_no_network_fails_fast_and_info_says_so(fakeweb, tmp_path, no_network):
    offline = {p: "https://offline.example" for p in ("serper", "serpapi", "wikipedia", "jina")}
    cfg = config_for(fakeweb, tmp_path, base_urls=offline, max_attempts=4, backoff_initial=1.0, backoff_max=2.0,
                     allow_private_urls=False)
    env = make_liveweb_env([{"question": "q?", "answer": "a"}], tools=["search", "visit"], config=cfg)
    try:
        env.reset(seed=0)
        start = time.time()
        _, _, _, _, info = env.step('<tool_call>\n{"name": "search", "arguments": {"query": ["x"]}}\n</tool_call>')
        assert time.time() - start < 1.0  # no backoff: a name that does not resolve is not retried
        assert not info["tool_ok"] and info["tool_metadata"]["degraded"]
        assert "name resolution" in info["tool_error"] and info["tool_metadata"]["retries"] == 0
        start = time.time()
        _, _, _, _, info = env.step('<tool_call>\n{"name": "visit", "arguments": '
                                    '{"url": "https://example.org/", "goal": "g"}}\n</tool_call>')
        assert time.time() - start < 1.0
        assert not info["tool_ok"] and info["tool_metadata"]["degraded"] and "does not resolve" in info["tool_error"]
    finally:
        env.close()


def test_search_failure_reports_degraded(make_live, fakeweb):
    live = make_live()
    for provider in ("serper", "serpapi", "wikipedia"):
        fakeweb.faults.always(provider, "auth")
    result = LiveSearchTool(live)({"query": ["anything"]})
    assert not result.ok and result.metadata["degraded"] and "every source failed" in result.error
