"""A parser worker process: ``python -m wiki_sim.ingest.worker IN_FD OUT_FD``.

It reads length-prefixed pickled messages from ``IN_FD`` and writes its own to ``OUT_FD``
(both pipes from :class:`~wiki_sim.ingest.pool.ParsePool`):

- in: ``{"parser", "args", "page_timeout"}`` once, then a list of ``(title, wikitext)``
  per task, ``None`` to stop;
- out: ``("ready",)`` once started, ``("start", i, time.monotonic())`` before each page of
  a task (the pool's watchdog reads it), ``("done", results)`` after the task.

Each page runs under ``SIGALRM``: past ``page_timeout`` seconds it is abandoned and
reported as a :class:`Skip`; an exception in the parser is a Skip too. A fresh interpreter
(not ``fork``) keeps the worker independent of the build process's threads and of its
``__main__`` module.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import signal
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from wiki_sim.records import Page

_HEADER = struct.Struct("!Q")


@dataclass
class Skip:
    """A page that was not parsed, and why."""

    title: str
    reason: str
    kind: str = "error"
    """``timeout`` (SIGALRM), ``stuck`` (watchdog killed the worker), ``crash`` or ``error``."""


class PageTimeout(Exception):
    pass


def send_msg(f: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)) + data)
    f.flush()


def _read_exact(fd: int, n: int) -> bytes:
    parts = []
    while n:
        block = os.read(fd, min(n, 1 << 20))
        if not block:
            raise EOFError("pipe closed")
        parts.append(block)
        n -= len(block)
    return b"".join(parts)


def recv_msg(fd: int) -> Any:
    """One message from raw file descriptor ``fd`` (unbuffered, so ``select`` on it stays truthful)."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    return pickle.loads(_read_exact(fd, size))


def resolve_parser(path: str) -> Callable[..., Page]:
    """``'package.module:function'`` -> the function."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _on_alarm(signum: int, frame: Any) -> None:
    raise PageTimeout()


def parse_items(parse: Callable[..., Page], items: list[tuple[str, str]], args: tuple, page_timeout: float,
                on_start: Callable[[int], None] | None = None) -> list[Page | Skip]:
    """Parse each ``(title, wikitext)`` under the SIGALRM limit; never raises for a bad page."""
    out: list[Page | Skip] = []
    for i, (title, text) in enumerate(items):
        if on_start is not None:
            on_start(i)
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, page_timeout)
                result: Page | Skip = parse(title, text, *args)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except PageTimeout:
            result = Skip(title, f"timeout after {page_timeout:g}s", "timeout")
        except RecursionError:
            result = Skip(title, "RecursionError (markup nested too deeply)", "error")
        except Exception as exc:  # a page that breaks the parser is skipped, never fatal
            result = Skip(title, f"{type(exc).__name__}: {exc}"[:300], "error")
        out.append(result)
    return out


def serve(in_fd: int, out_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the build process's to handle
    signal.signal(signal.SIGALRM, _on_alarm)
    out = os.fdopen(out_fd, "wb")
    init = recv_msg(in_fd)
    parse = resolve_parser(init["parser"])
    args, page_timeout = tuple(init["args"]), float(init["page_timeout"])
    # Parse trees hold no reference cycles; the cyclic GC only re-scans them (it doubled parse time).
    gc.disable()
    send_msg(out, ("ready",))
    last_collect = time.monotonic()
    while True:
        try:
            items = recv_msg(in_fd)
        except EOFError:
            return
        if items is None:
            return
        results = parse_items(parse, items, args, page_timeout,
                              lambda i: send_msg(out, ("start", i, time.monotonic())))
        send_msg(out, ("done", results))
        if time.monotonic() - last_collect > 30:  # a safety net only; a full collection costs ms
            gc.collect()
            last_collect = time.monotonic()


if __name__ == "__main__":
    # Import by name so pickled Skips say wiki_sim.ingest.worker.Skip, not __main__.Skip.
    from wiki_sim.ingest.worker import serve as _serve

    _serve(int(sys.argv[1]), int(sys.argv[2]))
