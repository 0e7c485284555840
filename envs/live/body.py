"""Reading a reply's body with a byte cap that counts decompressed bytes.

requests decompresses a whole body in memory before anyone can look at its size, so a
1 MB gzip reply that inflates to 1 GiB costs 1 GiB (and reached the cache). Here the body is
read from the raw stream in small pieces and inflated with ``zlib``'s ``max_length``, so no
more than ``cap + 1`` decompressed bytes ever exist: a decompression bomb stops at the cap,
and so does a body that is merely huge, or that lies about its ``Content-Length``. Only
``gzip``, ``deflate`` and ``identity`` are read (the transport asks for nothing else).
"""

from __future__ import annotations

import zlib
from typing import Iterable

from envs.live.errors import BadResponse, TooLarge

CHUNK = 64 * 1024
ACCEPT_ENCODING = "gzip, deflate"


def content_length(headers) -> int | None:
    """The declared ``Content-Length`` (None when absent or unreadable)."""
    value = headers.get("Content-Length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def check_declared_length(source: str, headers, cap: int) -> None:
    """TooLarge before reading anything when the server declares a body over ``cap``."""
    declared = content_length(headers)
    if declared is not None and declared > cap:
        raise TooLarge(source, f"the reply is {declared} bytes, over the limit of {cap} bytes (max_page_bytes)")


class _Inflater:
    """gzip/zlib/raw-deflate decompression, several gzip members in a row allowed, never
    producing more than ``limit`` bytes per call."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        self._wbits = zlib.MAX_WBITS | 32 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._d = zlib.decompressobj(self._wbits)
        self._first = True

    def feed(self, data: bytes, limit: int) -> bytes:
        """Inflate ``data``; at most ``limit`` (>= 1) output bytes are returned, and the rest
        of the input is kept (only the caller's cap check runs past it)."""
        try:
            out = self._d.decompress(data, limit)
        except zlib.error:
            if self.encoding == "deflate" and self._first:  # raw deflate without the zlib header
                self._wbits, self._d = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)
                out = self._d.decompress(data, limit)
            else:
                raise
        self._first = False
        while len(out) < limit and (self._d.unconsumed_tail or (self._d.eof and self._d.unused_data)):
            if self._d.eof:  # another gzip member follows
                rest = self._d.unused_data
                self._d = zlib.decompressobj(self._wbits)
                out += self._d.decompress(rest, limit - len(out))
            else:
                out += self._d.decompress(self._d.unconsumed_tail, limit - len(out))
        return out


def read_capped(source: str, chunks: Iterable[bytes], encoding: str, cap: int) -> bytes:
    """The decoded body from the raw ``chunks`` (as sent on the wire); TooLarge as soon as
    the decoded bytes, or the raw bytes, pass ``cap``."""
    encoding = (encoding or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
        error = BadResponse(source, f"unsupported Content-Encoding {encoding[:40]!r} (expected gzip or deflate)")
        error.retryable = False
        raise error
    inflater = None if encoding == "identity" else _Inflater(encoding)
    out = bytearray()
    wire = 0
    for chunk in chunks:
        if not chunk:
            continue
        wire += len(chunk)
        if inflater is None:
            out += chunk
        else:
            try:
                out += inflater.feed(chunk, cap - len(out) + 1)
            except zlib.error as e:
                error = BadResponse(source, f"the {encoding} body does not decompress ({e})")
                error.retryable = False
                raise error from None
        if len(out) > cap or wire > cap:
            raise TooLarge(source, f"the reply is larger than the limit of {cap} bytes (max_page_bytes)"
                           + (" after decompression" if inflater is not None and len(out) > cap else ""))
    return bytes(out)
