"""Loopback servers that speak each live provider's API, with fault injection.

For the tests and ``benchmarks/live_faults.py``: one ``ThreadingHTTPServer`` on 127.0.0.1
serves, under path prefixes that are the adapters' base URLs,

- ``/serper/search`` and ``/serper/scholar`` (POST JSON, header ``X-API-KEY``),
- ``/serpapi/search.json`` (``engine=google`` / ``google_scholar``, ``api_key``),
- ``/wikipedia/w/rest.php/v1/search/page`` and ``/wikipedia/w/api.php?list=search``,
- ``/jina/<url>`` (Jina Reader: JSON with ``Accept: application/json``, else its text format),
- ``/pages/<slug>`` (HTML), ``/pages/<slug>.pdf``, ``/pages/<slug>.txt`` for direct fetch,
- ``/openai/v1/chat/completions`` (an extractive "model" that answers in the visit JSON),

over a small deterministic corpus, every provider ranking the same documents the same way,
and hostile pages under ``/hostile/`` (:mod:`envs.live.hostile`: a decompression bomb, huge
and dribbling bodies, redirects, a request echo). With ``echo=True`` the search providers
and the reader echo each request (headers, fully percent-encoded query, a base64 credential)
in their replies, as a careless provider does.
Faults are injected per provider, scripted (:meth:`FaultPlan.fail_next`), permanent
(:meth:`FaultPlan.always`) or random at a rate (:meth:`FaultPlan.random`). Every request is
logged with its arrival time, so a test can measure request rates at the server.
``python -m envs.live.offline`` serves it for a person (see :mod:`envs.live.offline`).
"""

from __future__ import annotations

import base64
import json
import random
import re
import socket
import struct
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from envs.live.hostile import HostileRoutes

Fault = Literal["429", "429_retry_after", "500", "503", "reset", "timeout", "slow", "malformed_json",
                "truncated", "html_error", "auth", "quota"]
FAULTS: tuple[str, ...] = ("429", "429_retry_after", "500", "503", "reset", "timeout", "slow", "malformed_json",
                           "truncated", "html_error", "auth", "quota")
PROVIDER_PREFIXES = {"serper": "serper", "serpapi": "serpapi", "wikipedia": "wikipedia", "jina": "jina",
                     "pages": "direct", "openai": "summarizer", "hostile": "hostile"}
_WORD = re.compile(r"\w+")
_SYLLABLES = ["var", "nel", "tor", "mi", "sa", "ka", "lin", "dro", "ve", "pha", "qu", "ren", "bo", "zel", "ith", "ora"]
_KINDS = ["Observatory", "Bridge", "Abbey", "Railway", "Museum", "Lighthouse", "Academy", "Canal"]
_PLACES = ["Northmere", "Caldera Bay", "Essenfold", "Lowrick", "Tamsin Vale", "Orlan"]


@dataclass
class FakeDoc:
    """One document of the fake web."""

    slug: str
    title: str
    lead: str
    sections: list[tuple[str, str]]
    year: int
    founder: str

    @property
    def fact(self) -> str:
        """The sentence a visit for "who founded it and when" must find."""
        return f"{self.title} was founded in {self.year} by {self.founder}."

    def markdown(self) -> str:
        parts = [f"# {self.title}", self.lead]
        for heading, body in self.sections:
            parts += [f"## {heading}", body]
        return "\n\n".join(parts)

    def html(self) -> str:
        body = "".join(f"<h2>{h}</h2><p>{p}</p>" for h, p in self.sections)
        return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{self.title} - Fake Encyclopedia</title>"
                "</head><body><nav><a href='/'>Home</a> | <a href='/about'>About</a> | Log in</nav>"
                f"<article><h1>{self.title}</h1><p>{self.lead}</p>{body}</article>"
                "<footer>Text is available under a fake license. Privacy policy.</footer></body></html>")


def default_corpus(n: int = 48, seed: int = 7) -> list[FakeDoc]:
    """``n`` deterministic documents, each with a founding fact and two filler sections."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        name = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
        kind, place = _KINDS[i % len(_KINDS)], rng.choice(_PLACES)
        title = f"{name} {kind}"
        year = rng.randint(1700, 1990)
        founder = " ".join("".join(rng.choice(_SYLLABLES) for _ in range(2)).capitalize() for _ in range(2))
        lead = f"The {title} is a {kind.lower()} in {place}, known for its {rng.choice(['archives', 'towers', 'gardens', 'lenses'])}."
        history = (f"{title} was founded in {year} by {founder}. It was rebuilt after a fire in {year + rng.randint(5, 30)}. "
                   f"Its collection grew under the direction of the {place} council.")
        desc = (f"The {kind.lower()} stands near the river of {place}. Visitors arrive by the old road. "
                f"It has {rng.randint(2, 40)} rooms and a small library.")
        docs.append(FakeDoc(f"doc-{i}", title, lead, [("History", history), ("Description", desc)], year, founder))
    return docs


def _tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if len(t) > 2]


def make_pdf(title: str, lines: list[str]) -> bytes:
    """A small valid PDF (one page, Helvetica, one text line per item), written by hand."""
    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    stream = "BT /F1 11 Tf 50 780 Td 14 TL " + " ".join(f"({esc(l)}) Tj T*" for l in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(stream.encode('latin-1'))} >>\nstream\n{stream}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({esc(title)}) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


class FaultPlan:
    """Which fault, if any, the next request to each provider gets."""

    def __init__(self, seed: int = 0):
        self._lock = threading.Lock()
        self._queue: dict[str, deque] = defaultdict(deque)
        self._always: dict[str, str] = {}
        self._random: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._rng = random.Random(seed)

    def fail_next(self, provider: str, *faults: str) -> None:
        """The next requests to ``provider`` get these faults, in order."""
        for f in faults:
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; expected one of {FAULTS}")
        with self._lock:
            self._queue[provider].extend(faults)

    def always(self, provider: str, fault: str | None) -> None:
        """Every request to ``provider`` gets ``fault`` (None: stop)."""
        with self._lock:
            if fault is None:
                self._always.pop(provider, None)
            else:
                self._always[provider] = fault

    def random(self, provider: str, rate: float, faults: tuple[str, ...]) -> None:
        """Each request to ``provider`` gets one of ``faults`` with probability ``rate``."""
        with self._lock:
            self._random[provider] = (rate, tuple(faults))

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._always.clear()
            self._random.clear()

    def next(self, provider: str) -> str | None:
        with self._lock:
            if self._queue[provider]:
                return self._queue[provider].popleft()
            if provider in self._always:
                return self._always[provider]
            rate, faults = self._random.get(provider, (0.0, ()))
            if faults and self._rng.random() < rate:
                return self._rng.choice(faults)
        return None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client that hung up is not news
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class FakeWeb:
    """The fake providers on ``http://127.0.0.1:<port>``; use as a context manager."""

    def __init__(self, corpus: list[FakeDoc] | None = None, keys: dict[str, str] | None = None, *,
                 retry_after: str = "1", slow_s: float = 0.1, timeout_s: float = 3.0, seed: int = 0,
                 host: str = "127.0.0.1", port: int = 0, echo: bool = False):
        self.docs = corpus or default_corpus()
        self.by_slug = {d.slug: d for d in self.docs}
        self.keys = dict(keys or {})
        self.retry_after, self.slow_s, self.timeout_s = retry_after, slow_s, timeout_s
        self.faults = FaultPlan(seed)
        self.host = host
        """Loopback address to listen on (``127.0.0.2`` makes a second, "internal" server)."""
        self.port = port
        """Port to listen on (0: a free one, see :attr:`url`)."""
        self.echo = echo
        """Search providers and the reader echo each request in their replies."""
        self.canned: dict[str, list[dict]] = {}
        """Serper ``organic`` lists to answer for given queries instead of the corpus ranking."""
        self._log: list[tuple[float, str, str | None, str]] = []
        self._log_lock = threading.Lock()
        self.stopping = threading.Event()
        self.server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "FakeWeb":
        handler = type("Handler", (_Handler,), {"web": self})
        self.server = _QuietServer((self.host, self.port), handler)
        self.server.daemon_threads = True
        self.server.request_queue_size = 128
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def __enter__(self) -> "FakeWeb":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self.server is not None, "FakeWeb.start() first"
        return f"http://{self.host}:{self.server.server_address[1]}"

    def base_urls(self) -> dict[str, str]:
        """``LiveConfig.base_urls`` pointing every provider here."""
        return {"serper": f"{self.url}/serper", "serpapi": f"{self.url}/serpapi", "wikipedia": f"{self.url}/wikipedia",
                "jina": f"{self.url}/jina", "summarizer": f"{self.url}/openai/v1"}

    def page_url(self, slug: str, suffix: str = "") -> str:
        return f"{self.url}/pages/{slug}{suffix}"

    # ------------------------------------------------------------------ the corpus

    def rank(self, query: str, k: int = 10) -> list[FakeDoc]:
        """The documents every search provider returns for ``query``, best first."""
        words = set(_tokens(query))
        scored = []
        for i, doc in enumerate(self.docs):
            title, body = set(_tokens(doc.title)), _tokens(doc.markdown())
            score = 3 * len(words & title) + sum(1 for t in body if t in words)
            if score:
                scored.append((-score, i, doc))
        return [d for _, _, d in sorted(scored)[:k]]

    def snippet(self, doc: FakeDoc, query: str) -> str:
        words = set(_tokens(query))
        sentences = re.split(r"(?<=\.)\s+", doc.lead + " " + " ".join(b for _, b in doc.sections))
        best = max(sentences, key=lambda s: len(words & set(_tokens(s))))
        return best[:160]

    # ------------------------------------------------------------------ request log

    def record(self, provider: str, fault: str | None, detail: str = "") -> None:
        with self._log_lock:
            self._log.append((time.time(), provider, fault, detail))

    def requests(self, provider: str | None = None) -> list[tuple[float, str, str | None, str]]:
        """(arrival time, provider, fault, path and body) of every request so far (to ``provider``)."""
        with self._log_lock:
            return [r for r in self._log if provider is None or r[1] == provider]

    def clear_log(self) -> None:
        with self._log_lock:
            self._log.clear()


class _Handler(HostileRoutes, BaseHTTPRequestHandler):
    web: FakeWeb
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet: tests read the request log instead
        pass

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    # ------------------------------------------------------------------ plumbing

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        prefix = parts.path.strip("/").split("/", 1)[0]
        provider = PROVIDER_PREFIXES.get(prefix)
        if provider is None:
            return self._send(404, b"no such provider", "text/plain")
        fault = self.web.faults.next(provider)
        self.web.record(provider, fault, f"{self.path} {self.body[:300].decode('utf-8', 'replace')}")
        try:
            if fault and self._fault(provider, fault):
                return
            getattr(self, f"_{provider}")(method, parts)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to answer

    def _send(self, code: int, body: bytes | str, ctype: str = "application/json", headers: dict | None = None,
              declared_length: int | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(declared_length if declared_length is not None else len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if declared_length is not None:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _json(self, code: int, payload, headers: dict | None = None) -> None:
        self._send(code, json.dumps(payload), "application/json", headers)

    def _fault(self, provider: str, fault: str) -> bool:
        """Apply ``fault``; True when it replaced the reply."""
        web = self.web
        if fault == "slow":
            web.stopping.wait(web.slow_s)
            return False
        if fault == "timeout":
            web.stopping.wait(web.timeout_s)
            return False
        if fault == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()  # now, so the client gets a RST rather than an orderly FIN
            return True
        if fault == "429":
            self._json(429, {"message": "Too many requests", "code": 429})
        elif fault == "429_retry_after":
            self._json(429, {"message": "Too many requests", "code": 429}, {"Retry-After": web.retry_after})
        elif fault in ("500", "503"):
            self._send(int(fault), f"<html><body><h1>{fault} Service Unavailable</h1></body></html>", "text/html")
        elif fault == "malformed_json":
            self._send(200, '{"organic": [{"title": "Broken', "application/json")
        elif fault == "truncated":
            body = json.dumps({"data": {"content": "x" * 400}, "organic": []}).encode()
            self._send(200, body[: len(body) // 2], "application/json", declared_length=len(body))
        elif fault == "html_error":
            self._send(200, "<!DOCTYPE html><html><body><h1>Bad gateway</h1><p>The upstream failed.</p></body></html>",
                       "text/html")
        elif fault == "auth":
            self._json(401 if provider != "direct" else 403, {"message": "Unauthorized.", "statusCode": 401})
        elif fault == "quota":
            self._quota(provider)
        return True

    def _quota(self, provider: str) -> None:
        if provider == "serper":
            self._json(400, {"message": "Not enough credits", "statusCode": 400})
        elif provider == "serpapi":
            self._json(429, {"error": "Your account has run out of searches."})
        elif provider == "jina":
            self._json(402, {"data": None, "code": 402, "name": "InsufficientBalanceError", "status": 40203,
                             "message": "Account balance not enough to run this query, please recharge."})
        elif provider == "summarizer":
            self._json(429, {"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota",
                                       "code": "insufficient_quota"}})
        else:
            self._json(403, {"message": "Forbidden"})

    def _key_ok(self, provider: str, given: str | None) -> bool:
        expected = self.web.keys.get(provider)
        if expected is None or given == expected:
            return True
        self._json(401 if provider != "serpapi" else 401, {"message": "Unauthorized.", "error": "Invalid API key."})
        return False

    # ------------------------------------------------------------------ providers

    def _serper(self, method: str, parts) -> None:
        if method != "POST" or parts.path not in ("/serper/search", "/serper/scholar"):
            return self._json(404, {"message": "Not found"})
        if not self._key_ok("serper", self.headers.get("X-API-KEY")):
            return
        try:
            request = json.loads(self.body or b"{}")
            query, k = str(request["q"]), int(request.get("num", 10))
        except (ValueError, KeyError):
            return self._json(400, {"message": "Query is required", "statusCode": 400})
        docs = self.web.rank(query, k)
        if parts.path == "/serper/search" and query in self.web.canned:
            organic = self.web.canned[query][:k]
        elif parts.path == "/serper/search":
            organic = [{"title": d.title, "link": self.web.page_url(d.slug), "snippet": self.web.snippet(d, query),
                        "position": i + 1, **({"date": f"Jan 1, {d.year}"} if i == 0 else {})}
                       for i, d in enumerate(docs)]
        else:
            organic = [{"title": d.title, "link": self.web.page_url(d.slug),
                        "publicationInfo": f"{d.founder} - Journal of {d.title.split()[-1]}s, {d.year}",
                        "snippet": self.web.snippet(d, query), "year": d.year, "citedBy": 3 * i + 1,
                        "pdfUrl": self.web.page_url(d.slug, ".pdf")} for i, d in enumerate(docs)]
        if self.web.echo:
            organic = [{"title": "Request echo", "link": f"{self.web.url}/hostile/echo",
                        "snippet": f"You sent {json.dumps(dict(self.headers))} {self.body.decode('utf-8', 'replace')}"}
                       ] + organic
        self._json(200, {"searchParameters": {"q": query, "type": parts.path.rsplit("/", 1)[1], "num": k},
                         "organic": organic, "credits": 1})

    def _serpapi(self, method: str, parts) -> None:
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path != "/serpapi/search.json" or params.get("engine") not in ("google", "google_scholar"):
            return self._json(400, {"error": "Unsupported `engine` parameter."})
        if not self._key_ok("serpapi", params.get("api_key")):
            return
        query, k = params.get("q", ""), int(params.get("num", 10))
        docs = self.web.rank(query, k)
        if not docs:
            return self._json(200, {"search_metadata": {"status": "Success"},
                                    "error": "Google hasn't returned any results for this query."})
        if params["engine"] == "google":
            results = [{"position": 0, "title": "Request echo", "link": f"{self.web.url}/hostile/echo",
                        "snippet": "You asked for " + "".join(f"%{b:02X}" for b in self.path.encode())}
                       ] if self.web.echo else []
            results += [{"position": i + 1, "title": d.title, "link": self.web.page_url(d.slug),
                        "snippet": self.web.snippet(d, query)} for i, d in enumerate(docs)]
        else:
            results = [{"position": i, "title": d.title, "link": self.web.page_url(d.slug),
                        "snippet": self.web.snippet(d, query),
                        "publication_info": {"summary": f"{d.founder} - Journal of {d.title.split()[-1]}s, {d.year} - example.org"},
                        "inline_links": {"cited_by": {"total": 3 * i + 1}},
                        "resources": [{"title": "example.org", "file_format": "PDF", "link": self.web.page_url(d.slug, ".pdf")}]}
                       for i, d in enumerate(docs)]
        self._json(200, {"search_metadata": {"status": "Success"},
                         "search_parameters": {"engine": params["engine"], "q": query}, "organic_results": results})

    def _wikipedia(self, method: str, parts) -> None:
        agent = self.headers.get("User-Agent", "")
        if not agent or re.fullmatch(r"python-requests/[\d.]+", agent):
            return self._json(403, {"message": "Please set a user-agent and respect our robot policy."})
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/wikipedia/w/rest.php/v1/search/page":
            query, k = params.get("q", ""), int(params.get("limit", 10))
            words = set(_tokens(query))
            pages = []
            for d in self.web.rank(query, k):
                excerpt = " ".join(f'<span class="searchmatch">{w}</span>' if w.lower() in words else w
                                   for w in self.web.snippet(d, query).split())
                pages.append({"id": int(d.slug.split("-")[1]), "key": d.title.replace(" ", "_"), "title": d.title,
                              "excerpt": excerpt, "matched_title": None, "description": f"{d.title.split()[-1]} in fiction"})
            return self._json(200, {"pages": pages})
        if parts.path == "/wikipedia/w/api.php" and params.get("list") == "search":
            query, k = params.get("srsearch", ""), int(params.get("srlimit", 10))
            hits = [{"ns": 0, "title": d.title, "pageid": int(d.slug.split("-")[1]),
                     "snippet": self.web.snippet(d, query).replace(d.title.split()[0], f'<span class="searchmatch">{d.title.split()[0]}</span>')}
                    for d in self.web.rank(query, k)]
            return self._json(200, {"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(hits)}, "search": hits}})
        self._json(400, {"error": {"code": "badvalue", "info": "Unrecognized value for parameter \"list\"."}})

    def _doc_for(self, url: str) -> tuple[FakeDoc | None, str]:
        path = urlsplit(url).path
        match = re.fullmatch(r"/pages/([\w-]+?)(\.pdf|\.txt)?", path)
        if not url.startswith(self.web.url) or not match:
            return None, ""
        return self.web.by_slug.get(match.group(1)), match.group(2) or ""

    def _jina(self, method: str, parts) -> None:
        auth = self.headers.get("Authorization")
        if auth is not None and not self._key_ok("jina", auth.removeprefix("Bearer ")):
            return
        target = self.path[len("/jina/"):]
        doc, _ = self._doc_for(target)
        if doc is None:
            return self._json(422, {"data": None, "code": 422, "name": "AssertionFailureError", "status": 42206,
                                    "message": f"Failed to goto {target}: net::ERR_NAME_NOT_RESOLVED"})
        content = doc.markdown()
        if self.web.echo:
            basic = base64.b64encode(f"reader:{auth or ''}".encode()).decode()
            content += f"\n\nYou sent Authorization: {auth}; forwarded as Proxy-Authorization: Basic {basic}"
        if "application/json" in self.headers.get("Accept", ""):
            return self._json(200, {"code": 200, "status": 20000, "data": {
                "title": doc.title, "url": target, "content": content, "usage": {"tokens": 120}}})
        self._send(200, f"Title: {doc.title}\n\nURL Source: {target}\n\nMarkdown Content:\n{content}",
                   "text/plain; charset=utf-8")

    def _direct(self, method: str, parts) -> None:
        doc, suffix = self._doc_for(self.web.url + parts.path)
        if doc is None:
            return self._send(404, "<html><body><h1>Not Found</h1></body></html>", "text/html")
        if suffix == ".pdf":
            lines = [doc.title, doc.lead] + [s for _, b in doc.sections for s in re.split(r"(?<=\.)\s+", b)]
            return self._send(200, make_pdf(doc.title, lines), "application/pdf")
        if suffix == ".txt":
            return self._send(200, doc.markdown(), "text/plain; charset=utf-8")
        self._send(200, doc.html(), "text/html; charset=utf-8")

    def _summarizer(self, method: str, parts) -> None:
        if parts.path != "/openai/v1/chat/completions":
            return self._json(404, {"error": {"message": "Unknown route"}})
        auth = self.headers.get("Authorization", "")
        if not self._key_ok("summarizer", auth.removeprefix("Bearer ") if auth else None):
            return
        request = json.loads(self.body or b"{}")
        prompt = request["messages"][-1]["content"]
        # The sections of wiki_sim.summarizers.PROMPT.
        page = prompt.split("## **Webpage Content**", 1)[-1].split("## **User Goal**", 1)[0]
        goal = prompt.split("## **User Goal**", 1)[-1].split("## **Task Guidelines**", 1)[0].strip()
        words = set(_tokens(goal))
        sentences = [s.strip() for s in re.split(r"(?<=\.)\s+|\n+", page) if s.strip() and not s.startswith("#")]
        evidence = [s for s in sentences if words & set(_tokens(s))] or sentences[:1]
        content = json.dumps({"rational": f"The page mentions {', '.join(sorted(words)[:3])}.",
                              "evidence": " ".join(evidence), "summary": "(model) " + (evidence[0] if evidence else "")})
        self._json(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": request.get("model"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4}})

