"""Page readers: Jina Reader, and a direct fetch with HTML-to-text by trafilatura and PDFs
by pypdf.

Each has ``name``/``provider``, ``available()`` and ``read(url, deadline) -> Reply[PageText]``.
The URL is the agent's: :meth:`envs.live.manager.LiveWeb.read` checks it against the network
policy (:mod:`envs.live.netpolicy`) before any reader runs, and the direct reader follows
redirects itself, checking every hop, over connections that refuse internal addresses.
"""

from __future__ import annotations

import io
import re
import time
from urllib.parse import urljoin, urlsplit

import requests

from envs.live.adapters.base import PageText, Reply, from_cache
from envs.live.config import LiveConfig
from envs.live.errors import AuthOrQuota, BadResponse, NotFound, RateLimited, Retryable
from envs.live.netpolicy import check_url
from envs.live.transport import Transport, check_status, retry_after

MAX_TITLE_CHARS = 2000
"""A ``<title>`` longer than this (before its close tag) is not taken as the page's title."""
# Every quantifier is bounded and the title's text may not hold another <title> tag, so each
# start position costs at most a few thousand steps: linear in the page, even on a page of
# nothing but unclosed <title> tags (an unbounded ``(.*?)</title>`` rescans to the end from
# every one of them: quadratic, minutes for a 1 MB page).
_TITLE = re.compile(r"<title(?:\s[^<>]{0,500})?>((?:[^<]|<(?!/?title\b)){0,%d})</title\s*>" % MAX_TITLE_CHARS,
                    re.I)
_JINA_HEADER = re.compile(r"^(Title|URL Source|Published Time|Warning):\s*(.*)$")
_TARGET_ERROR = re.compile(r"Target URL returned error (\d{3})")
_REDIRECTS = (301, 302, 303, 307, 308)
INSTALL_HINT = "pip install 'websailor-gym[live]'"


def _web_url(source: str, url: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NotFound(source, f"not a web URL: {url[:200]!r} (expected http:// or https://)")
    return url


def _unusable(source: str, message: str) -> BadResponse:
    error = BadResponse(source, message)
    error.retryable = False  # the same page gives the same nothing: try the next reader
    return error


def html_title(html: str) -> str:
    """The text of the page's first well-formed ``<title>...</title>`` (whitespace collapsed),
    or "" when there is none; linear in ``len(html)``."""
    match = _TITLE.search(html)
    return " ".join(match.group(1).split()) if match else ""


def parse_jina_text(body: str) -> tuple[str, str, str]:
    """(title, warning, content) of Jina Reader's plain-text reply (``Title: ...``,
    ``URL Source: ...``, ``Markdown Content:`` then the page)."""
    head, sep, content = body.partition("Markdown Content:")
    if not sep:
        return "", "", body.strip()
    fields = {}
    for line in head.splitlines():
        match = _JINA_HEADER.match(line.strip())
        if match:
            fields[match.group(1)] = match.group(2).strip()
    return fields.get("Title", ""), fields.get("Warning", ""), content.strip()


class _Reader:
    """What every reader shares: its transport and config, and ``read`` that checks the URL is
    a web URL before the reader's own ``_read`` runs."""

    name = provider = ""

    def __init__(self, transport: Transport, config: LiveConfig):
        self.transport, self.config = transport, config

    def available(self) -> bool:
        return True

    def read(self, url: str, deadline: float) -> Reply[PageText]:
        return self._read(_web_url(self.name, url), deadline)

    def _read(self, url: str, deadline: float) -> Reply[PageText]:
        raise NotImplementedError


class JinaReader(_Reader):
    """Jina Reader: ``GET <base>/<url>``, JSON reply (``Accept: application/json``), optional
    bearer key. 402 means insufficient balance; 429 carries Retry-After."""

    name = provider = "jina"

    def _read(self, url: str, deadline: float) -> Reply[PageText]:
        headers = {"Accept": "application/json"}
        if self.config.jina_api_key:
            headers["Authorization"] = f"Bearer {self.config.jina_api_key}"
        response = self.transport.request(self.provider, "GET", f"{self.config.base_urls['jina']}/{url}",
                                          deadline=deadline, headers=headers)
        code = response.status_code
        if code == 402:
            raise AuthOrQuota(self.name, "insufficient balance (HTTP 402)")
        if code in (400, 422, 451):
            raise NotFound(self.name, f"could not load the page (HTTP {code})")
        check_status(self.name, response, what="page")
        title, warning, content = self._parse(response)
        target = _TARGET_ERROR.search(warning)
        if target and target.group(1) in ("404", "410"):
            raise NotFound(self.name, f"page not found (the site answered HTTP {target.group(1)})",
                           status=int(target.group(1)))
        if not content:
            raise _unusable(self.name, "the reader returned no content")
        return Reply(PageText(url, title, content), from_cache(response))

    def _parse(self, response: requests.Response) -> tuple[str, str, str]:
        ctype = response.headers.get("Content-Type", "")
        if "json" not in ctype:
            text = response.text
            if text.lstrip()[:1] in ("<", "{"):
                self.transport.forget(response)
                raise BadResponse(self.name, "expected the reader's reply, got an HTML page or broken JSON")
            return parse_jina_text(text)
        try:
            data = response.json()
        except ValueError:
            self.transport.forget(response)
            raise BadResponse(self.name, "expected JSON, got malformed JSON") from None
        page = data.get("data") if isinstance(data, dict) else None
        if not isinstance(page, dict) or not isinstance(page.get("content"), str):
            self.transport.forget(response)
            raise BadResponse(self.name, "reply has no data.content")
        return str(page.get("title") or ""), str(page.get("warning") or ""), page["content"].strip()


class DirectReader(_Reader):
    """Fetch the URL itself: HTML to text by trafilatura (headings kept as markdown), PDF by
    pypdf, plain text as it is."""

    name = provider = "direct"

    def _read(self, url: str, deadline: float) -> Reply[PageText]:
        response = self._fetch(url, deadline)
        code = response.status_code
        if code in (401, 403, 451):  # this site refuses us; not a problem with the source as a whole
            raise NotFound(self.name, f"the site refused access (HTTP {code})", status=code)
        if 400 <= code < 500 and code not in (408, 425, 429):
            raise NotFound(self.name, f"page not found (HTTP {code})", status=code)
        check_status(self.name, response, what="page")
        body = response.content
        ctype = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        try:
            if ctype == "application/pdf" or body[:5] == b"%PDF-":
                title, text = self._pdf(body)
            elif ctype in ("text/html", "application/xhtml+xml") or body.lstrip()[:1] == b"<":
                title, text = self._html(body, url)
            elif ctype.startswith("text/") or ctype in ("application/json", ""):
                title, text = "", response.text
            else:
                raise _unusable(self.name, f"cannot read content of type {ctype!r}")
        except (BadResponse, NotFound):
            self.transport.forget(response)
            raise
        if not text.strip():
            self.transport.forget(response)
            raise _unusable(self.name, "no readable text on the page")
        return Reply(PageText(url, title, text.strip()), from_cache(response))

    def _fetch(self, url: str, deadline: float):
        """GET ``url``, following up to ``max_redirects`` redirects itself: every hop is
        checked by the network policy, and connections refuse internal addresses."""
        headers = {"Accept": "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,*/*;q=0.5"}
        first = True
        for _ in range(self.config.max_redirects + 1):
            if not first:  # the first URL was checked by LiveWeb.read
                check_url(url, allow_private=self.config.allow_private_urls, source=self.name,
                          timeout=max(0.01, min(self.config.connect_timeout, deadline - time.time())))
            response = self.transport.request(self.provider, "GET", url, deadline=deadline, headers=headers,
                                              guarded=True, allow_redirects=False)
            location = response.headers.get("Location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            url, first = urljoin(url, location.strip()), False
        raise NotFound(self.name, f"more than {self.config.max_redirects} redirects (max_redirects)")

    def _html(self, body: bytes, url: str) -> tuple[str, str]:
        try:
            import trafilatura
        except ImportError:
            raise _unusable(self.name, "reading HTML pages needs trafilatura, which is not installed: "
                                       f"pip install trafilatura lxml_html_clean (or {INSTALL_HINT})") from None

        html = body.decode("utf-8", errors="replace")
        text = trafilatura.extract(html, url=url, output_format="markdown", include_tables=True,
                                   include_comments=False, favor_recall=True) or trafilatura.html2txt(html) or ""
        return html_title(html), text

    def _pdf(self, body: bytes) -> tuple[str, str]:
        try:
            from pypdf import PdfReader
            from pypdf.errors import PyPdfError
        except ImportError:
            raise _unusable(self.name, f"reading PDFs needs pypdf, which is not installed: pip install pypdf "
                                       f"(or {INSTALL_HINT})") from None

        if len(body) > self.config.max_page_bytes:
            raise _unusable(self.name, f"PDF larger than {self.config.max_page_bytes} bytes")
        try:
            reader = PdfReader(io.BytesIO(body))
            pages = [page.extract_text() or "" for page in reader.pages]
            title = str((reader.metadata or {}).get("/Title") or "")
        except (PyPdfError, ValueError, KeyError, TypeError) as e:
            raise BadResponse(self.name, f"unreadable PDF ({type(e).__name__})") from None
        return title, "\n\n".join(p.strip() for p in pages if p.strip())


def reader_adapters(transport: Transport, config: LiveConfig) -> list:
    """The page-reader chain, in the configured order."""
    make = {"jina": lambda: JinaReader(transport, config), "direct": lambda: DirectReader(transport, config)}
    return [make[name]() for name in config.reader_sources]


__all__ = ["JinaReader", "DirectReader", "html_title", "parse_jina_text", "reader_adapters", "RateLimited", "Retryable"]
