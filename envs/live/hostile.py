"""Hostile routes of the fake web (:mod:`envs.live.fakeweb`), for the hardening tests and
``benchmarks/hostile.py``. Under ``/hostile/``:

- ``bomb?mib=N``: an HTML page, ``Content-Encoding: gzip``, about N/1000 MiB on the wire
  that inflates to N MiB (default 1024);
- ``huge?mib=N&length=0|1``: N MiB of HTML, with or without an honest ``Content-Length``;
- ``dribble?n=N&every=S``: declares N bytes, then sends one every S seconds;
- ``dribble_headers?every=S``: sends the status line, then a header byte every S seconds;
- ``redirect?to=URL``: 302 to URL (``hops=K`` first redirects K times to itself);
- ``echo``: a page that shows the request's headers, path and body, as a careless API does;
- ``titles?n=N``: N unclosed ``<title>`` tags (default 200,000), then the page's real
  ``<title>Titles page</title>`` and a body (a title regex that rescans from each is quadratic).

Every request is logged like the providers' (provider ``hostile``).
"""

from __future__ import annotations

import functools
import html
import json
import zlib
from urllib.parse import parse_qs, quote

_PAGE_HEAD = b"<!DOCTYPE html><html><head><title>Hostile page</title></head><body><p>"


@functools.lru_cache(maxsize=4)
def gzip_bomb(mib: int) -> bytes:
    """A gzip stream of ``mib`` MiB of an HTML page padded with zeros (built once, about
    1 KiB of output per MiB of input)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [compressor.compress(_PAGE_HEAD)]
    block = b"\0" * (1 << 20)
    for _ in range(mib):
        parts.append(compressor.compress(block))
    parts.append(compressor.flush())
    return b"".join(parts)


class HostileRoutes:
    """Mixed into the fake web's request handler (``self.web``, ``_send``, ``wfile``)."""

    def _hostile(self, method: str, parts) -> None:
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        route = parts.path[len("/hostile/"):]
        handler = getattr(self, f"_hostile_{route}", None)
        if handler is None:
            return self._send(404, "<html><body>no such hostile route</body></html>", "text/html")
        handler(params)

    def _hostile_bomb(self, params: dict) -> None:
        body = gzip_bomb(int(params.get("mib", 1024)))
        self._send(200, body, "text/html; charset=utf-8", {"Content-Encoding": "gzip"})

    def _hostile_huge(self, params: dict) -> None:
        mib = int(params.get("mib", 200))
        total = mib << 20
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        if params.get("length", "1") == "1":
            self.send_header("Content-Length", str(total))
        else:
            self.send_header("Connection", "close")  # the body ends when the connection does
            self.close_connection = True
        self.end_headers()
        chunk = b"<p>" + b"All work and no play makes a dull page. " * 1600 + b"</p>\n"
        sent = 0
        while sent < total and not self.web.stopping.is_set():
            piece = chunk[: total - sent]
            self.wfile.write(piece)
            sent += len(piece)

    def _hostile_dribble(self, params: dict) -> None:
        n, every = int(params.get("n", 1000)), float(params.get("every", 2.0))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        self.wfile.flush()
        for _ in range(n):
            if self.web.stopping.wait(every):
                return
            self.wfile.write(b"a")
            self.wfile.flush()

    def _hostile_dribble_headers(self, params: dict) -> None:
        every = float(params.get("every", 2.0))
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.wfile.flush()
        for byte in b"X-Slow: " + b"s" * 10_000:
            if self.web.stopping.wait(every):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
        self.close_connection = True

    def _hostile_redirect(self, params: dict) -> None:
        hops = int(params.get("hops", 0))
        if hops > 0:
            target = f"/hostile/redirect?hops={hops - 1}&to={quote(params.get('to', ''), safe='')}"
        else:
            target = params.get("to", "/")
        self._send(302, "", "text/html", {"Location": target})

    def _hostile_titles(self, params: dict) -> None:
        self._send(200, unclosed_titles_page(int(params.get("n", 200_000))), "text/html; charset=utf-8")

    def _hostile_echo(self, params: dict) -> None:
        self._send(200, echo_page(self.command, self.path, dict(self.headers), self.body), "text/html; charset=utf-8")


TITLES_PAGE_TITLE = "Titles page"
TITLES_PAGE_FACT = "The Titles page was founded in 1901 by Ada Quell."


def unclosed_titles_page(n: int) -> str:
    """``n`` unclosed ``<title>`` tags in the head, then a well-formed title and a body."""
    return ("<!DOCTYPE html><html><head>" + "<title>" * n + f"<TITLE lang='en'>\n {TITLES_PAGE_TITLE} </title >"
            f"</head><body><article><h1>{TITLES_PAGE_TITLE}</h1><p>{TITLES_PAGE_FACT} It stands by the river "
            "and has a small library of old maps.</p></article></body></html>")


def echo_page(method: str, path: str, headers: dict, body: bytes) -> str:
    """An HTML page that shows a request back, as a careless server does."""
    shown = json.dumps({"method": method, "path": path, "headers": headers,
                        "body": body.decode("utf-8", "replace")}, indent=1)
    return ("<!DOCTYPE html><html><head><title>Request echo</title></head><body><h1>Your request</h1>"
            f"<p>This service shows every request it receives.</p><pre>{html.escape(shown)}</pre></body></html>")
