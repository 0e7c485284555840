"""The network policy for agent-chosen URLs: schemes, every spelling of an internal address,
every redirect hop, the connection's own peer, and the switch tests use for loopback."""

from __future__ import annotations

import ipaddress

import pytest

from envs.live import netpolicy
from envs.live.errors import Blocked, Unreachable
from envs.live.fakeweb import FakeWeb
from envs.live.netpolicy import address_kind, check_url
from envs.tools.visit import LiveVisitTool

INTERNAL = ["http://127.0.0.1/", "http://localhost/", "http://2130706433/", "http://0x7f.0.0.1/", "http://127.1/",
            "http://0177.0.0.1/", "http://0x7f000001/", "http://017700000001/", "http://[::1]/",
            "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://0.0.0.0/", "http://0/",
            "http://10.0.0.1/", "http://172.16.5.4/", "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/",
            "http://100.64.0.1/", "http://224.0.0.1/", "http://240.0.0.1/", "http://255.255.255.255/",
            "http://[fe80::1]/", "http://[fc00::1]/", "http://[ff02::1]/", "http://[::]/",
            "http://[2002:7f00:1::]/", "http://[64:ff9b::7f00:1]/", "http://[::ffff:169.254.169.254]/",
            "https://user:pass@127.0.0.1:8443/x"]


@pytest.mark.parametrize("url", INTERNAL)
def test_internal_addresses_are_refused_in_every_spelling(url):
    with pytest.raises(Blocked, match="only public web addresses"):
        check_url(url, allow_private=False)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/", "gopher://127.0.0.1:25/",
                                 "javascript:alert(1)", "http:///nohost", "http://example.org:99999/"])
def test_only_http_urls_with_a_host_pass_even_when_private_is_allowed(url):
    with pytest.raises(Blocked):
        check_url(url, allow_private=True)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "93.184.216.34"])
def test_public_addresses_pass(address):
    assert address_kind(ipaddress.ip_address(address)) is None
    host = f"[{address}]" if ":" in address else address
    check_url(f"https://{host}/wiki/Page", allow_private=False)


def test_a_name_that_does_not_resolve_is_unreachable_at_once(monkeypatch):
    def fail(*args, **kwargs):
        raise OSError(-2, "Name or service not known")

    monkeypatch.setattr(netpolicy.socket, "getaddrinfo", fail)
    with pytest.raises(Unreachable, match="does not resolve"):
        check_url("https://no-such-host.example/", allow_private=False)


def _visit(live, url):
    return LiveVisitTool(live)({"url": [url], "goal": "who founded it"})


def test_visit_refuses_loopback_and_fetches_nothing(make_live, fakeweb):
    live = make_live(allow_private_urls=False, reader_sources=("jina", "direct"))
    port = fakeweb.url.rsplit(":", 1)[1]
    for host in ("127.0.0.1", "localhost", "2130706433", "0x7f.0.0.1", "127.1"):
        result = _visit(live, f"http://{host}:{port}/pages/doc-1")
        assert not result.ok and "only public web addresses" in result.text
        assert "Only public web pages can be visited" in result.text and "Try again later" not in result.text
        assert result.metadata["degraded"] and "only public" in result.error
    assert fakeweb.requests("direct") == [] and fakeweb.requests("jina") == []
    # The same URLs are reachable when private addresses are allowed: the refusal was the policy.
    open_live = make_live(allow_private_urls=True, reader_sources=("direct",))
    result = _visit(open_live, f"http://2130706433:{port}/pages/doc-1")
    assert result.ok and fakeweb.docs[1].fact in result.text


@pytest.fixture
def internal():
    """A second server on 127.0.0.2: the "internal" service a redirect points at."""
    with FakeWeb(host="127.0.0.2") as web:
        yield web


@pytest.fixture
def public_loopback(monkeypatch):
    """Treat 127.0.0.1 (the fake web) as a public address, everything else as it is."""
    real = netpolicy.address_kind

    def kind(ip):
        return None if str(ip) == "127.0.0.1" else real(ip)

    monkeypatch.setattr(netpolicy, "address_kind", kind)


def test_redirect_to_an_internal_address_is_refused_on_that_hop(make_live, fakeweb, internal, public_loopback):
    live = make_live(allow_private_urls=False, reader_sources=("direct",))
    assert _visit(live, fakeweb.page_url("doc-2")).ok  # the "public" server is reachable
    target = internal.page_url("doc-3")
    for hops in (0, 2):
        result = _visit(live, f"{fakeweb.url}/hostile/redirect?hops={hops}&to={target}")
        assert not result.ok and "127.0.0.2" in result.text and "only public web addresses" in result.text
    assert internal.requests() == []
    result = _visit(live, f"{fakeweb.url}/hostile/redirect?to=file:///etc/passwd")
    assert not result.ok and "only http:// and https://" in result.text


def test_redirect_chains_are_bounded(make_live, fakeweb):
    live = make_live(reader_sources=("direct",), max_redirects=3)
    result = _visit(live, f"{fakeweb.url}/hostile/redirect?hops=5&to={fakeweb.page_url('doc-0')}")
    assert not result.ok and "more than 3 redirects" in result.text
    assert _visit(live, f"{fakeweb.url}/hostile/redirect?hops=2&to={fakeweb.page_url('doc-0')}").ok


def test_the_connection_itself_is_checked_when_the_name_rebinds(make_live, fakeweb, monkeypatch):
    """The pre-check saw a public address; the connection went to loopback (DNS rebinding)."""
    monkeypatch.setattr(netpolicy, "resolve", lambda host, port, timeout: ["93.184.216.34"])
    live = make_live(allow_private_urls=False, reader_sources=("direct",))
    result = _visit(live, fakeweb.page_url("doc-4"))
    assert not result.ok and "the connection went to a loopback address" in result.text
    assert fakeweb.requests("direct") == []  # refused before the request was sent
