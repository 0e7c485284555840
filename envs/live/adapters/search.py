"""Search and scholar adapters: Serper, SerpAPI, Wikipedia (REST or Action API), ddgs.

Every adapter has ``name`` (reported as the source), ``provider`` (whose key, quota, rate
limit and base URL it uses: Serper's web and scholar endpoints share one), ``available()``
(a key is configured) and ``search(query, k, deadline) -> Reply[list[Hit]]``.
"""

from __future__ import annotations

import re
import time
from typing import Any, Literal

import requests

from envs.live.adapters.base import Hit, Reply, from_cache, strip_html
from envs.live.config import LiveConfig
from envs.live.errors import AuthOrQuota, BadResponse, LiveError, RateLimited, Retryable
from envs.live.transport import Transport, check_status, json_body, retry_after
from wiki_sim.records import title_to_url

_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


class SerperSearch:
    """Serper (``POST /search`` or ``/scholar``, JSON body, header ``X-API-KEY``)."""

    provider = "serper"

    def __init__(self, transport: Transport, config: LiveConfig, kind: Literal["web", "scholar"] = "web"):
        self.transport, self.config, self.kind = transport, config, kind
        self.name = "serper" if kind == "web" else "serper_scholar"

    def available(self) -> bool:
        return bool(self.config.serper_api_key)

    def search(self, query: str, k: int, deadline: float) -> Reply[list[Hit]]:
        path = "/search" if self.kind == "web" else "/scholar"
        response = self.transport.request(
            self.provider, "POST", self.config.base_urls["serper"] + path, deadline=deadline,
            json={"q": query, "num": k}, headers={"X-API-KEY": self.config.serper_api_key or ""})
        if response.status_code == 400 and "credit" in response.text.lower():
            raise AuthOrQuota(self.name, "out of credits (HTTP 400: Not enough credits)")
        check_status(self.name, response)
        data = json_body(self.name, response, self.transport)
        if not isinstance(data, dict) or ("organic" not in data and "searchParameters" not in data):
            self.transport.forget(response)
            raise BadResponse(self.name, "reply has neither 'organic' nor 'searchParameters'")
        items = data.get("organic") or []
        if not isinstance(items, list):
            self.transport.forget(response)
            raise BadResponse(self.name, "'organic' is not a list")
        hits = [self._hit(item) for item in items if isinstance(item, dict) and item.get("link")]
        return Reply(hits[:k], from_cache(response))

    def _hit(self, item: dict) -> Hit:
        if self.kind == "web":
            return Hit(_text(item.get("title")), _text(item.get("link")), _text(item.get("snippet")),
                       _text(item.get("date")))
        parts = [_text(item.get("publicationInfo"))]
        if item.get("citedBy") not in (None, ""):
            parts.append(f"Cited by {item['citedBy']}")
        parts.append(_text(item.get("snippet")))
        return Hit(_text(item.get("title")), _text(item.get("pdfUrl") or item.get("link")),
                   ". ".join(p for p in parts if p), _text(item.get("year")))


class SerpApiSearch:
    """SerpAPI (``GET /search.json``, ``engine=google`` or ``google_scholar``, ``api_key``)."""

    provider = "serpapi"

    def __init__(self, transport: Transport, config: LiveConfig, kind: Literal["web", "scholar"] = "web"):
        self.transport, self.config, self.kind = transport, config, kind
        self.name = "serpapi" if kind == "web" else "serpapi_scholar"

    def available(self) -> bool:
        return bool(self.config.serpapi_api_key)

    def search(self, query: str, k: int, deadline: float) -> Reply[list[Hit]]:
        engine = "google" if self.kind == "web" else "google_scholar"
        response = self.transport.request(
            self.provider, "GET", self.config.base_urls["serpapi"] + "/search.json", deadline=deadline,
            params={"engine": engine, "q": query, "num": k, "api_key": self.config.serpapi_api_key or ""})
        self._check(response)
        data = json_body(self.name, response, self.transport)
        if not isinstance(data, dict):
            self.transport.forget(response)
            raise BadResponse(self.name, "reply is not a JSON object")
        error = _text(data.get("error"))
        if error and "hasn't returned any results" not in error:
            self.transport.forget(response)
            raise BadResponse(self.name, f"provider error: {error}")
        items = data.get("organic_results") or []
        if not isinstance(items, list):
            self.transport.forget(response)
            raise BadResponse(self.name, "'organic_results' is not a list")
        hits = [self._hit(item) for item in items if isinstance(item, dict) and item.get("link")]
        return Reply(hits[:k], from_cache(response))

    def _check(self, response: requests.Response) -> None:
        if response.status_code == 429:
            message = response.text.lower()
            if "run out of searches" in message or ("plan" in message and "limit" in message):
                raise AuthOrQuota(self.name, "out of searches (HTTP 429)")
            raise RateLimited(self.name, "rate limited (HTTP 429)", retry_after=retry_after(response))
        check_status(self.name, response)

    def _hit(self, item: dict) -> Hit:
        if self.kind == "web":
            return Hit(_text(item.get("title")), _text(item.get("link")), _text(item.get("snippet")),
                       _text(item.get("date")))
        info = item.get("publication_info") or {}
        summary = _text(info.get("summary") if isinstance(info, dict) else info)
        cited = ((item.get("inline_links") or {}).get("cited_by") or {}).get("total")
        parts = [summary] + ([f"Cited by {cited}"] if cited not in (None, "") else []) + [_text(item.get("snippet"))]
        year = _YEAR.findall(summary)
        resources = item.get("resources") or []
        pdf = next((r.get("link") for r in resources if isinstance(r, dict) and r.get("link")), None)
        return Hit(_text(item.get("title")), _text(pdf or item.get("link")), ". ".join(p for p in parts if p),
                   year[-1] if year else "")


class WikipediaSearch:
    """Wikipedia's own search, keyless: REST ``/w/rest.php/v1/search/page`` or Action
    ``/w/api.php?action=query&list=search``. Results carry the real article URL."""

    provider = "wikipedia"
    name = "wikipedia"

    def __init__(self, transport: Transport, config: LiveConfig):
        self.transport, self.config = transport, config

    def available(self) -> bool:
        return True

    def search(self, query: str, k: int, deadline: float) -> Reply[list[Hit]]:
        base = self.config.base_urls["wikipedia"]
        if self.config.wikipedia_api == "rest":
            url, params, key = base + "/w/rest.php/v1/search/page", {"q": query, "limit": k}, "pages"
        else:
            url, key = base + "/w/api.php", "search"
            params = {"action": "query", "list": "search", "srsearch": query, "srlimit": k, "format": "json",
                      "formatversion": 2, "utf8": 1}
        response = self.transport.request(self.provider, "GET", url, deadline=deadline, params=params)
        check_status(self.name, response)
        data = json_body(self.name, response, self.transport)
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            self.transport.forget(response)
            code = _text(data["error"].get("code"))
            if code in ("maxlag", "ratelimited"):
                raise Retryable(self.name, f"API error {code}")
            raise BadResponse(self.name, f"API error {code}: {_text(data['error'].get('info'))}")
        items = data.get(key) if key == "pages" and isinstance(data, dict) else \
            (data.get("query") or {}).get("search") if isinstance(data, dict) else None
        if not isinstance(items, list):
            self.transport.forget(response)
            raise BadResponse(self.name, f"reply has no '{key}' list")
        hits = []
        for item in items:
            if not isinstance(item, dict) or not item.get("title"):
                continue
            snippet = strip_html(_text(item.get("excerpt") if key == "pages" else item.get("snippet")))
            description = _text(item.get("description"))
            if description and key == "pages":
                snippet = f"{description}. {snippet}" if snippet else description
            hits.append(Hit(_text(item["title"]), title_to_url(_text(item["title"])), snippet))
        return Reply(hits[:k], from_cache(response))


class DdgsSearch:
    """DuckDuckGo and others through the ``ddgs`` package (keyless; off by default).

    ``ddgs`` makes its own requests to fixed hosts, so it has no base URL and no reply cache;
    it still takes its slots from the shared limiter.
    """

    provider = "ddgs"
    name = "ddgs"

    def __init__(self, transport: Transport, config: LiveConfig):
        try:
            import ddgs  # noqa: F401
        except ImportError:
            raise ValueError("the 'ddgs' search source needs the ddgs package: pip install ddgs") from None
        self.transport, self.config = transport, config

    def available(self) -> bool:
        return True

    def search(self, query: str, k: int, deadline: float) -> Reply[list[Hit]]:
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        self.transport.limiter.acquire(self.provider, deadline)
        timeout = max(1, int(min(self.config.timeouts["ddgs"], deadline - time.time())))
        try:
            items = DDGS(timeout=timeout).text(query, max_results=k)
        except RatelimitException:
            raise RateLimited(self.name, "rate limited") from None
        except TimeoutException:
            raise Retryable(self.name, f"timed out after {timeout}s") from None
        except DDGSException as e:
            if "no results" in str(e).lower():
                return Reply([])
            raise Retryable(self.name, f"search failed ({type(e).__name__})") from None
        return Reply([Hit(_text(i.get("title")), _text(i.get("href")), _text(i.get("body")))
                      for i in items or [] if isinstance(i, dict) and i.get("href")][:k])


def search_adapters(transport: Transport, config: LiveConfig) -> list:
    """The web-search chain, in the configured order."""
    make = {"serper": lambda: SerperSearch(transport, config), "serpapi": lambda: SerpApiSearch(transport, config),
            "wikipedia": lambda: WikipediaSearch(transport, config), "ddgs": lambda: DdgsSearch(transport, config)}
    return [make[name]() for name in config.search_sources]


def scholar_adapters(transport: Transport, config: LiveConfig) -> list:
    """The Google Scholar chain, in the configured order."""
    make = {"serper": lambda: SerperSearch(transport, config, "scholar"),
            "serpapi": lambda: SerpApiSearch(transport, config, "scholar")}
    return [make[name]() for name in config.scholar_sources]


__all__ = ["SerperSearch", "SerpApiSearch", "WikipediaSearch", "DdgsSearch", "search_adapters",
           "scholar_adapters", "LiveError"]
