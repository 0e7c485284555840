"""Keeping API keys out of everything that is written or shown.

Keys are registered here when a :class:`~envs.live.config.LiveConfig` is built; from then on
:func:`scrub` replaces them (and anything that looks like a key-bearing URL parameter or
header) in any text. The cache serializer, the error taxonomy, the live tools' observations
and a logging filter on the HTTP libraries' loggers all pass their text through it.

A key travels in more than one spelling, and a provider that echoes its request echoes
them all: literally (a header), percent-encoded, wholly or in part, once or twice (a query
parameter; ``%2D`` for ``-`` is as valid as ``-``), and base64-encoded inside an
``Authorization: Basic`` value (``base64("user:KEY")``, where the key starts at any byte
offset). :func:`secret_patterns` matches every one of these: the key with each character
optionally percent-encoded, and the stable middle of its base64 encoding at each of the
three alignments (standard and URL-safe alphabets), so the key is found inside any base64
blob.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any

REDACTED = "REDACTED"
# Names under which providers take keys, as header or parameter; spelled every way we
# might meet them because requests-cache compares these names case-sensitively.
KEY_NAMES = ("Authorization", "X-API-KEY", "api_key", "apikey", "access_token", "key", "token")
_KEY_PARAM = re.compile(r"(?i)\b(api_key|apikey|access_token|key|token)=([^&\s\"'#]+)")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_patterns: tuple[re.Pattern, ...] = ()
_byte_patterns: tuple[re.Pattern, ...] = ()


def _hex(byte: int) -> str:
    return "".join(f"[{c}{c.lower()}]" if c.isalpha() else c for c in f"{byte:02X}")


def _percent_pattern(secret: str) -> str:
    """The key with every character either literal or percent-encoded (once or twice; hex
    digits in either case)."""
    return "".join(f"(?:{re.escape(ch)}|{''.join('%(?:25)?' + _hex(b) for b in ch.encode())})" for ch in secret)


def _base64_cores(secret: str) -> list[str]:
    """The part of base64(prefix + secret + suffix) that depends on the secret alone, for
    each of the three byte alignments (skipped when shorter than 8 characters)."""
    raw = secret.encode()
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start = (8 * offset + 5) // 6  # first character whose 6 bits all come from the secret
        end = (8 * (offset + len(raw))) // 6  # one past the last such character
        core = encoded[start:end]
        if len(core) >= 8:
            cores.append(core)
    return cores


def secret_patterns(secret: str) -> list[str]:
    """Regular expressions (text) matching ``secret`` in every spelling named above."""
    patterns = [_percent_pattern(secret)]
    for core in _base64_cores(secret):
        patterns.append(re.escape(core))
        urlsafe = core.replace("+", "-").replace("/", "_")
        if urlsafe != core:
            patterns.append(re.escape(urlsafe))
    return patterns


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret to scrub everywhere (ignored if empty or very short)."""
    global _secrets, _patterns, _byte_patterns
    if not value or len(value) < 4:
        return
    with _lock:
        if value not in _secrets:
            # Longest first, so a key that contains another is replaced whole.
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))
            texts = [p for secret in _secrets for p in secret_patterns(secret)]
            _patterns = tuple(re.compile(t) for t in texts)
            _byte_patterns = tuple(re.compile(t.encode()) for t in texts)


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
    """``text`` with every registered secret (in every spelling), ``api_key=...`` parameter
    and bearer or basic credential replaced by ``REDACTED``."""
    if not isinstance(text, str):
        text = str(text)
    text = _scrub_str(text)
    text = _KEY_PARAM.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def scrub_value(value: Any) -> Any:
    """``value`` (nested dicts, lists, str, bytes) with every registered secret replaced."""
    if isinstance(value, str):
        return _scrub_str(value)
    if isinstance(value, (bytes, bytearray)):
        for pattern in _byte_patterns:
            value = pattern.sub(REDACTED.encode(), value)
        return bytes(value)
    if isinstance(value, dict):
        return {k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_value(v) for v in value)
    return value


def _scrub_str(text: str) -> str:
    for pattern in _patterns:
        text = pattern.sub(REDACTED, text)
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
