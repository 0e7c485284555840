"""Keeping API keys out of everything that is written or shown.

Keys are registered here when a :class:`~envs.live.config.LiveConfig` is built; from then on
:func:`scrub` replaces them (and anything that looks like a key-bearing URL parameter or
header) in any text. The cache serializer, the error taxonomy and a logging filter on the
HTTP libraries' loggers all pass their text through it.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

REDACTED = "REDACTED"
# Names under which providers take keys, as header or parameter; spelled every way we
# might meet them because requests-cache compares these names case-sensitively.
KEY_NAMES = ("Authorization", "X-API-KEY", "api_key", "apikey", "access_token", "key", "token")
_KEY_PARAM = re.compile(r"(?i)\b(api_key|apikey|access_token|key|token)=([^&\s\"'#]+)")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret to scrub everywhere (ignored if empty or very short)."""
    global _secrets
    if not value or len(value) < 4:
        return
    with _lock:
        if value not in _secrets:
            # Longest first, so a key that contains another is replaced whole.
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))


def secrets() -> tuple[str, ...]:
    """The registered secrets."""
    return _secrets


def key_name_variants(names=KEY_NAMES) -> list[str]:
    """Each name as given, lower-cased, upper-cased and Title-Cased (``X-Api-Key``)."""
    out: list[str] = []
    for name in names:
        title = "-".join(part.capitalize() for part in name.split("-"))
        for variant in (name, name.lower(), name.upper(), title):
            if variant not in out:
                out.append(variant)
    return out


def scrub(text: str) -> str:
    """``text`` with every registered secret, ``api_key=...`` parameter and bearer token
    replaced by ``REDACTED``."""
    if not isinstance(text, str):
        text = str(text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _KEY_PARAM.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def scrub_value(value: Any) -> Any:
    """``value`` (nested dicts, lists, str, bytes) with every registered secret replaced."""
    if isinstance(value, str):
        return _scrub_str(value)
    if isinstance(value, bytes):
        for secret in _secrets:
            needle = secret.encode()
            if needle in value:
                value = value.replace(needle, REDACTED.encode())
        return value
    if isinstance(value, dict):
        return {k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_value(v) for v in value)
    return value


def _scrub_str(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's message with :func:`scrub` (urllib3 logs full URLs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error path
            return True
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


# Loggers that may print request URLs or headers; a filter applies only to records logged
# on the logger it is attached to, so each is named.
_LOGGERS = ("urllib3.connectionpool", "urllib3.connection", "urllib3.util.retry", "requests_cache.session",
            "requests_cache.policy.actions", "requests_cache.backends.base", "requests_cache.backends.sqlite",
            "envs.live")
_installed = False


def install_log_filter() -> None:
    """Attach :class:`RedactingFilter` to the HTTP libraries' loggers (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        for name in _LOGGERS:
            logging.getLogger(name).addFilter(RedactingFilter())
        _installed = True
