"""Configuration of the managed live web: keys, endpoints, source order, limits, cache.

Everything has a default, so ``LiveConfig()`` works with no keys at all (Wikipedia search,
direct page fetch, extractive summaries). Keys and endpoints come, in increasing priority,
from the defaults, environment variables, a config file (:meth:`LiveConfig.from_file`,
TOML or JSON with the same field names) and constructor arguments. Per-provider tables
(``base_urls``, ``qps``, ``timeouts``, ``cache_expiry``) are merged over the defaults, so a
file or a caller names only what it changes.

Environment variables: ``SERPER_API_KEY``, ``SERPAPI_API_KEY``, ``JINA_API_KEY``,
``WEBSAILOR_SUMMARIZER_MODEL``, ``WEBSAILOR_SUMMARIZER_API_KEY``, and
``WEBSAILOR_<PROVIDER>_BASE_URL`` (``WEBSAILOR_SERPER_BASE_URL``, ...,
``WEBSAILOR_SUMMARIZER_BASE_URL``); ``WEBSAILOR_LIVE_CONFIG`` names a config file that
:func:`envs.liveweb.make_liveweb_env` reads when it is given no config.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Mapping

from envs.live.redact import register_secret
from wiki_sim.common.errors import UserError

SearchSource = Literal["serper", "serpapi", "wikipedia", "ddgs"]
ScholarSource = Literal["serper", "serpapi"]
ReaderSource = Literal["jina", "direct"]
Provider = Literal["serper", "serpapi", "wikipedia", "ddgs", "jina", "direct", "summarizer"]
PROVIDERS: tuple[str, ...] = ("serper", "serpapi", "wikipedia", "ddgs", "jina", "direct", "summarizer")
SEARCH_SOURCES = ("serper", "serpapi", "wikipedia", "ddgs")
SCHOLAR_SOURCES = ("serper", "serpapi")
READER_SOURCES = ("jina", "direct")

DEFAULT_BASE_URLS = {
    "serper": "https://google.serper.dev",
    "serpapi": "https://serpapi.com",
    "wikipedia": "https://en.wikipedia.org",
    "jina": "https://r.jina.ai",
}
DEFAULT_QPS = {"serper": 5.0, "serpapi": 2.0, "wikipedia": 5.0, "ddgs": 0.5, "direct": 10.0, "summarizer": 4.0}
# Jina Reader allows 20 requests a minute without a key and 500 with one.
JINA_QPS_KEYLESS, JINA_QPS_KEYED = 0.33, 8.0
DEFAULT_TIMEOUTS = {"serper": 15.0, "serpapi": 30.0, "wikipedia": 15.0, "ddgs": 15.0, "jina": 30.0,
                    "direct": 20.0, "summarizer": 60.0}
_DAY = 86400.0
DEFAULT_EXPIRY = {"serper": 7 * _DAY, "serpapi": 7 * _DAY, "wikipedia": _DAY, "ddgs": _DAY,
                  "jina": 7 * _DAY, "direct": 7 * _DAY, "summarizer": 30 * _DAY}
DEFAULT_USER_AGENT = ("websailor-gym/0.1 (research-agent environment; "
                      "https://pypi.org/project/websailor-gym/) python-requests")


_OPTIONAL_STR = ("serper_api_key", "serpapi_api_key", "jina_api_key", "summarizer_model", "summarizer_api_key",
                 "cache_path", "limiter_dir")
_BOOLS = ("cache", "allow_private_urls", "trust_env", "read_env")
_INTS = ("burst", "max_attempts", "memo_items", "results_per_query", "max_page_bytes", "max_redirects",
         "summarizer_input_chars", "evidence_chars")
_FLOATS = ("connect_timeout", "deadline_s", "backoff_initial", "backoff_max", "backoff_jitter", "retry_after_max",
           "exhausted_cooldown_s")


def default_cache_dir() -> Path:
    """``<project cache>/live``: the project cache is ``$WEBSAILOR_CACHE``, else
    ``~/.cache/websailor-gym`` (one place for every cache the project keeps)."""
    from wiki_sim.common.cache import cache_dir

    return cache_dir() / "live"


@dataclass
class LiveConfig:
    """Keys, endpoints, source order, QPS, timeouts, retries and cache of the live web."""

    serper_api_key: str | None = field(default=None, repr=False)
    """Serper key (header ``X-API-KEY``); env ``SERPER_API_KEY``."""
    serpapi_api_key: str | None = field(default=None, repr=False)
    """SerpAPI key (parameter ``api_key``); env ``SERPAPI_API_KEY``."""
    jina_api_key: str | None = field(default=None, repr=False)
    """Jina Reader key (optional: keyless use is allowed at a lower rate); env ``JINA_API_KEY``."""
    summarizer_model: str | None = None
    """Model name at the OpenAI-compatible summarizer endpoint; env ``WEBSAILOR_SUMMARIZER_MODEL``.
    The model summarizer is used when this and ``base_urls['summarizer']`` are both set."""
    summarizer_api_key: str | None = field(default=None, repr=False)
    """Bearer key of the summarizer endpoint (optional); env ``WEBSAILOR_SUMMARIZER_API_KEY``."""
    base_urls: dict[str, str] = field(default_factory=dict)
    """Endpoint per provider, merged over the defaults; env ``WEBSAILOR_<PROVIDER>_BASE_URL``.
    ``summarizer`` is the OpenAI-compatible base (``.../v1``), without a default."""
    search_sources: tuple[SearchSource, ...] = ("serper", "serpapi", "wikipedia")
    """Search sources in fallback order; keyed ones without a key are skipped. ``ddgs`` is
    off by default and needs ``pip install ddgs``."""
    scholar_sources: tuple[ScholarSource, ...] = ("serper", "serpapi")
    """Google Scholar sources in fallback order (both need a key)."""
    reader_sources: tuple[ReaderSource, ...] = ("jina", "direct")
    """Page readers in fallback order."""
    wikipedia_api: Literal["rest", "action"] = "rest"
    """Wikipedia search endpoint: REST ``/w/rest.php/v1/search/page`` or Action ``list=search``."""
    qps: dict[str, float] = field(default_factory=dict)
    """Requests per second per provider, over all threads and processes of this machine that
    share ``limiter_dir``; merged over the defaults."""
    burst: int = 1
    """Requests a provider may receive back to back before the rate applies."""
    timeouts: dict[str, float] = field(default_factory=dict)
    """Read timeout in seconds per provider, merged over the defaults."""
    connect_timeout: float = 5.0
    """Seconds to wait for a TCP connection."""
    deadline_s: float = 60.0
    """Upper bound in seconds on one query or one page: retries and fallbacks included."""
    max_attempts: int = 4
    """Attempts per source for one query or page (1 means no retry)."""
    backoff_initial: float = 0.5
    """First retry's backoff in seconds; doubles with each attempt."""
    backoff_max: float = 8.0
    """Largest backoff in seconds."""
    backoff_jitter: float = 0.5
    """Random extra backoff, uniform in [0, this] seconds."""
    retry_after_max: float = 30.0
    """A provider's Retry-After is honoured up to this many seconds; longer ones skip to the
    next source."""
    exhausted_cooldown_s: float = 300.0
    """After an auth or quota failure a source is set aside for this many seconds."""
    cache: bool = True
    """Cache successful provider replies (requests-cache, SQLite, WAL)."""
    cache_path: str | None = None
    """Cache database; default ``<cache dir>/live_cache.sqlite`` (see :func:`default_cache_dir`)."""
    cache_expiry: dict[str, float] = field(default_factory=dict)
    """Seconds a cached reply stays valid, per provider (-1: never expires, 0: not cached);
    merged over the defaults."""
    memo_items: int = 4096
    """Answered queries and pages each process also keeps in memory, in front of the SQLite
    cache (0: none). Only used when ``cache`` is on."""
    limiter_dir: str | None = None
    """Folder of the shared QPS state files; default ``<cache dir>/limits``. Processes that
    share a key must share this folder."""
    user_agent: str = DEFAULT_USER_AGENT
    """User-Agent of every request (Wikimedia asks for a descriptive one)."""
    results_per_query: int = 10
    """Search hits per query."""
    max_page_bytes: int = 8_000_000
    """Largest reply body, in bytes after decompression, that any request reads (a page,
    a PDF, a provider's JSON); a bigger one is refused at this size (a decompression bomb
    stops here) and nothing of it is cached. At most 500,000,000."""
    allow_private_urls: bool = False
    """Let ``visit`` reach loopback, private, link-local and other internal addresses. Off:
    agent-chosen URLs (and every redirect hop) must resolve to public addresses. Tests turn
    it on for their loopback servers; provider ``base_urls`` are never checked."""
    max_redirects: int = 5
    """Redirect hops a page fetch follows (each one checked like the first URL)."""
    summarizer_input_chars: int = 60_000
    """Characters of page text sent to the summarizer model."""
    evidence_chars: int = 3000
    """Characters of evidence per page of the extractive summarizer (the fallback)."""
    trust_env: bool = True
    """Honour ``HTTP(S)_PROXY``/``NO_PROXY`` from the environment."""
    read_env: bool = True
    """Fill keys and endpoints not given here from the environment variables above."""

    def __post_init__(self) -> None:
        self._check_types()
        env = os.environ if self.read_env else {}
        for name, var in (("serper_api_key", "SERPER_API_KEY"), ("serpapi_api_key", "SERPAPI_API_KEY"),
                          ("jina_api_key", "JINA_API_KEY"), ("summarizer_model", "WEBSAILOR_SUMMARIZER_MODEL"),
                          ("summarizer_api_key", "WEBSAILOR_SUMMARIZER_API_KEY")):
            if getattr(self, name) is None and env.get(var):
                setattr(self, name, env[var])
        self._validate_tables()
        urls = dict(DEFAULT_BASE_URLS)
        urls.update({p: env[f"WEBSAILOR_{p.upper()}_BASE_URL"] for p in PROVIDERS
                     if env.get(f"WEBSAILOR_{p.upper()}_BASE_URL")})
        urls.update(self.base_urls)
        self.base_urls = {p: u.rstrip("/") for p, u in urls.items()}
        qps = dict(DEFAULT_QPS, jina=JINA_QPS_KEYED if self.jina_api_key else JINA_QPS_KEYLESS)
        self.qps = {**qps, **{k: float(v) for k, v in self.qps.items()}}
        self.timeouts = {**DEFAULT_TIMEOUTS, **{k: float(v) for k, v in self.timeouts.items()}}
        self.cache_expiry = {**DEFAULT_EXPIRY, **{k: float(v) for k, v in self.cache_expiry.items()}}
        self.search_sources = tuple(self.search_sources)
        self.scholar_sources = tuple(self.scholar_sources)
        self.reader_sources = tuple(self.reader_sources)
        self._validate()
        for key in (self.serper_api_key, self.serpapi_api_key, self.jina_api_key, self.summarizer_api_key):
            register_secret(key)

    def _check_types(self) -> None:
        """Each field of the right type (a config file is typed by hand): a one-line error
        naming the field, the expected type and the value, before anything uses it."""
        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        def fail(name: str, expected: str, value: Any) -> None:
            raise UserError(f"LiveConfig.{name}: expected {expected}, got {value!r}")

        for name in _OPTIONAL_STR:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                fail(name, "a string (or no value)", value)
        for name in ("user_agent", "wikipedia_api"):
            if not isinstance(getattr(self, name), str):
                fail(name, "a string", getattr(self, name))
        for name in _BOOLS:
            if not isinstance(getattr(self, name), bool):
                fail(name, "true or false", getattr(self, name))
        for name in _INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                fail(name, "an integer", value)
        for name in _FLOATS:
            if not number(getattr(self, name)):
                fail(name, "a number", getattr(self, name))
        for name in ("search_sources", "scholar_sources", "reader_sources"):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                fail(name, "a list of source names", value)
        for name, check, expected in (("base_urls", lambda v: isinstance(v, str), "a URL string"),
                                      ("qps", number, "a number"), ("timeouts", number, "a number"),
                                      ("cache_expiry", number, "a number")):
            table = getattr(self, name)
            if isinstance(table, Mapping):
                for provider, value in table.items():
                    if not check(value):
                        raise UserError(f"LiveConfig.{name}[{provider!r}]: expected {expected}, got {value!r}")

    def _validate_tables(self) -> None:
        for name in ("base_urls", "qps", "timeouts", "cache_expiry"):
            table = getattr(self, name)
            if not isinstance(table, Mapping):
                raise UserError(f"LiveConfig.{name}: expected a mapping provider -> value, got {table!r}")
            unknown = sorted(set(table) - set(PROVIDERS))
            if unknown:
                raise UserError(f"LiveConfig.{name}: unknown provider(s) {unknown}; expected some of {list(PROVIDERS)}")

    def _validate(self) -> None:
        for name, allowed in (("search_sources", SEARCH_SOURCES), ("scholar_sources", SCHOLAR_SOURCES),
                              ("reader_sources", READER_SOURCES)):
            order = getattr(self, name)
            bad = [s for s in order if s not in allowed]
            if bad or len(set(order)) != len(order):
                raise UserError(f"LiveConfig.{name}: expected distinct sources from {list(allowed)}, got {list(order)}")
        if "ddgs" in self.search_sources and importlib.util.find_spec("ddgs") is None:
            raise UserError("LiveConfig.search_sources: 'ddgs' needs the ddgs package: pip install ddgs "
                             "(or pip install 'websailor-gym[live]')")
        if self.wikipedia_api not in ("rest", "action"):
            raise UserError(f"LiveConfig.wikipedia_api: expected 'rest' or 'action', got {self.wikipedia_api!r}")
        for p, rate in self.qps.items():
            if not rate > 0:
                raise UserError(f"LiveConfig.qps[{p!r}]: expected a rate > 0, got {rate}")
        for p, t in self.timeouts.items():
            if not t > 0:
                raise UserError(f"LiveConfig.timeouts[{p!r}]: expected seconds > 0, got {t}")
        for p, e in self.cache_expiry.items():
            if e < 0 and e != -1:
                raise UserError(f"LiveConfig.cache_expiry[{p!r}]: expected seconds >= 0 or -1, got {e}")
        for p, url in self.base_urls.items():
            if not url.startswith(("http://", "https://")):
                raise UserError(f"LiveConfig.base_urls[{p!r}]: expected an http(s) URL, got {url!r}")
        positive = {"connect_timeout": self.connect_timeout, "deadline_s": self.deadline_s,
                    "max_attempts": self.max_attempts, "burst": self.burst,
                    "results_per_query": self.results_per_query, "max_page_bytes": self.max_page_bytes,
                    "summarizer_input_chars": self.summarizer_input_chars, "evidence_chars": self.evidence_chars}
        for name, value in positive.items():
            if not value > 0:
                raise UserError(f"LiveConfig.{name}: expected > 0, got {value}")
        nonneg = {"memo_items": self.memo_items, "backoff_initial": self.backoff_initial, "backoff_max": self.backoff_max,
                  "backoff_jitter": self.backoff_jitter, "retry_after_max": self.retry_after_max,
                  "exhausted_cooldown_s": self.exhausted_cooldown_s}
        if self.max_page_bytes > 500_000_000:  # SQLite refuses blobs near 1e9 bytes
            raise UserError(f"LiveConfig.max_page_bytes: expected at most 500000000, got {self.max_page_bytes}")
        if isinstance(self.max_redirects, bool) or not isinstance(self.max_redirects, int) or self.max_redirects < 0:
            raise UserError(f"LiveConfig.max_redirects: expected an integer >= 0, got {self.max_redirects!r}")
        for name, value in nonneg.items():
            if value < 0:
                raise UserError(f"LiveConfig.{name}: expected >= 0, got {value}")

    # ----------------------------------------------------------------------------- derived

    def has_key(self, provider: str) -> bool:
        """Whether ``provider`` can be used: keyed providers need their key; the summarizer
        needs an endpoint and a model."""
        if provider == "serper":
            return bool(self.serper_api_key)
        if provider == "serpapi":
            return bool(self.serpapi_api_key)
        if provider == "summarizer":
            return bool(self.summarizer_model and self.base_urls.get("summarizer"))
        return True

    def resolved_cache_path(self) -> Path:
        """Where the cache database lives."""
        return Path(self.cache_path) if self.cache_path else default_cache_dir() / "live_cache.sqlite"

    def resolved_limiter_dir(self) -> Path:
        """Where the shared QPS state files live."""
        return Path(self.limiter_dir) if self.limiter_dir else default_cache_dir() / "limits"

    # ----------------------------------------------------------------------------- loading

    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> "LiveConfig":
        """Read a TOML (``.toml``) or JSON file of field values; ``overrides`` win."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise UserError(f"live config {path}: cannot read: {e.strerror}") from None
        try:
            data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
            kind = "TOML" if path.suffix == ".toml" else "JSON"
            raise UserError(f"live config {path}: not valid {kind}: {e}") from None
        if not isinstance(data, dict):
            raise UserError(f"live config {path}: expected a table of fields, got {type(data).__name__}")
        return cls.from_dict({**data, **overrides}, origin=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], origin: str = "live config") -> "LiveConfig":
        """Build from a mapping of field names; unknown names are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"{origin}: unknown field(s) {unknown}; expected some of {sorted(known)}")
        data = dict(data)
        for name in ("search_sources", "scholar_sources", "reader_sources"):
            if name in data and isinstance(data[name], str):
                data[name] = (data[name],)
        return cls(**data)

    @classmethod
    def coerce(cls, config: "LiveConfig | Mapping[str, Any] | str | os.PathLike | None") -> "LiveConfig":
        """A config from a config, a mapping of fields, a file path, or None (then the file
        named by ``WEBSAILOR_LIVE_CONFIG``, if any, else the defaults and the environment)."""
        if isinstance(config, LiveConfig):
            return config
        if isinstance(config, Mapping):
            return cls.from_dict(config)
        if isinstance(config, (str, os.PathLike)):
            return cls.from_file(config)
        if config is None:
            env_file = os.environ.get("WEBSAILOR_LIVE_CONFIG")
            return cls.from_file(env_file) if env_file else cls()
        raise UserError(f"live config: expected a LiveConfig, a mapping, a file path or None, got {type(config).__name__}")
