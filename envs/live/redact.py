"""Keeping API keys out of everything that is written or shown.

Keys are registered here when a :class:`~envs.live.config.LiveConfig` is built; from then on
:func:`scrub` replaces them (and anything that looks like a key-bearing URL parameter or
header) in any text. The cache serializer, the error taxonomy, the live tools' observations
and a logging filter on the HTTP libraries' loggers all pass their text through it.

A key travels in more than one spelling, and a provider that echoes its request echoes
them all: literally (a header), percent-encoded, wholly or in part, once or twice (a query
parameter; ``%2D`` for ``-`` is as valid as ``-``), and base64-encoded inside an
``Authorization: Basic`` value (``base64("user:KEY")``, where the key starts at any byte
offset). :func:`secret_spellings` lists what is looked for: the key itself and the stable
middle of its base64 encoding at each of the three alignments (standard and URL-safe
alphabets), replaced as plain substrings, so the key is found inside any base64 blob; and
one regular expression with each character of the key optionally percent-encoded, run only
on text that holds a ``%`` (so scrubbing stays a few plain substring searches).
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
_literals: tuple[str, ...] = ()
_byte_literals: tuple[bytes, ...] = ()
_percent: re.Pattern | None = None
_byte_percent: re.Pattern | None = None


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


def secret_spellings(secret: str) -> tuple[list[str], str]:
    """The plain spellings of ``secret`` (itself, its base64 cores) and the regular
    expression of its percent-encoded spellings."""
    literals = [secret]
    for core in _base64_cores(secret):
        literals.append(core)
        urlsafe = core.replace("+", "-").replace("/", "_")
        if urlsafe != core:
            literals.append(urlsafe)
    return literals, _percent_pattern(secret)


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret to scrub everywhere (ignored if empty or very short)."""
    global _secrets, _literals, _byte_literals, _percent, _byte_percent
    if not value or len(value) < 4:
        return
    with _lock:
        if value not in _secrets:
            # Longest first, so a key that contains another is replaced whole.
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))
            spellings = [secret_spellings(secret) for secret in _secrets]
            literals = sorted({lit for lits, _ in spellings for lit in lits}, key=len, reverse=True)
            # The lookahead lets the engine skip, in one set test, every position where no key
            # (or percent-escape) can start: about 3x faster than the bare alternation.
            starts = "".join(sorted({re.escape(secret[0]) for secret in _secrets}))
            percent = f"(?=[{starts}%])(?:" + "|".join(pattern for _, pattern in spellings) + ")"
            _literals, _byte_literals = tuple(literals), tuple(lit.encode() for lit in literals)
            _percent, _byte_percent = re.compile(percent), re.compile(percent.encode())


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
        value = bytes(value)
        for literal in _byte_literals:
            if literal in value:
                value = value.replace(literal, REDACTED.encode())
        if _byte_percent is not None and b"%" in value:
            value = _byte_percent.sub(REDACTED.encode(), value)
        return value
    if isinstance(value, dict):
        return {k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_value(v) for v in value)
    return value


def _scrub_str(text: str) -> str:
    for literal in _literals:
        if literal in text:
            text = text.replace(literal, REDACTED)
    if _percent is not None and "%" in text:
        text = _percent.sub(REDACTED, text)
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
