"""Parse pages in worker processes, in order, with a per-page time limit that always holds.

The main process reads the dump and hands chunks of ``(title, wikitext)`` to workers;
results come back in submission order, so a build is deterministic whatever the number
of workers. Two guards bound the time spent on one page:

- in the worker, ``SIGALRM`` (``setitimer``) interrupts a page after ``page_timeout``
  seconds; the page is reported as skipped and the worker moves on;
- in the main process, a watchdog reads each worker's shared progress slot (index of the
  page being parsed, and when it started). A worker still on one page ``hard_grace``
  seconds after its limit (the parser is stuck in C code that never checks signals, or it
  ignores them) is killed and replaced; that page is skipped and the rest of its chunk is
  submitted again. A worker that dies (a crash in C code) is handled the same way.

Workers come from the ``forkserver`` start method: forking the build process itself
(which may hold threads, e.g. tqdm's monitor) could deadlock a child.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing as mp
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable, Iterator

from wiki_sim.records import Page

DEFAULT_PARSER = "wiki_sim.ingest.wikitext:parse_page"
_PRELOAD = ["wiki_sim.ingest.wikitext"]


@dataclass
class Skip:
    """A page that was not parsed, and why (``timeout`` or the error)."""

    title: str
    reason: str
    kind: str = "error"
    """``timeout`` (SIGALRM), ``stuck`` (watchdog killed the worker), ``crash`` or ``error``."""


class PageTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise PageTimeout()


def resolve_parser(path: str) -> Callable[..., Page]:
    """``'package.module:function'`` -> the function."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def parse_items(parse: Callable[..., Page], items: list[tuple[str, str]], args: tuple, page_timeout: float,
                progress: Any = None) -> list[Page | Skip]:
    """Parse each ``(title, wikitext)`` under the SIGALRM limit; never raises for a bad page."""
    out: list[Page | Skip] = []
    for i, (title, text) in enumerate(items):
        if progress is not None:
            progress[0] = i
            progress[1] = time.monotonic()
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
        if progress is not None:
            progress[1] = 0.0
        out.append(result)
    return out


def _worker_main(conn: Connection, progress: Any, parser: str, args: tuple, page_timeout: float) -> None:
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    parse = resolve_parser(parser)
    # Parse trees hold no reference cycles; the cyclic GC only re-scans them (it doubled parse time).
    gc.disable()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        conn.send(parse_items(parse, msg, args, page_timeout, progress))
        gc.collect()


@dataclass
class _Task:
    seq: int
    offset: int
    items: list[tuple[str, str]]
    attempts: int = 0


@dataclass
class _Worker:
    proc: Any
    conn: Connection
    progress: Any
    task: _Task | None = None


@dataclass
class _Chunk:
    slots: list[Page | Skip | None]
    remaining: int
    extra: Any = None


@dataclass
class PoolStats:
    restarts: int = 0
    skipped: list[Skip] = field(default_factory=list)


class ParsePool:
    """Ordered parallel ``parse(title, wikitext, *parser_args)`` over chunks of pages.

    Use :meth:`imap`; workers start on the first chunk and stop when it ends (or is closed).
    """

    def __init__(self, workers: int = 2, page_timeout: float = 10.0, parser: str = DEFAULT_PARSER,
                 parser_args: tuple = (), hard_grace: float | None = None, max_pending: int | None = None):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if not page_timeout > 0:
            raise ValueError(f"page_timeout must be > 0 seconds, got {page_timeout}")
        self.workers = workers
        self.page_timeout = page_timeout
        self.parser = parser
        self.parser_args = parser_args
        self.hard_limit = page_timeout + (hard_grace if hard_grace is not None else max(1.0, page_timeout))
        self.max_pending = max_pending or 4 * workers
        self.stats = PoolStats()
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(_PRELOAD)
        self._pool: list[_Worker] = []

    # -- worker management
    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        progress = self._ctx.Array("d", 2, lock=False)
        proc = self._ctx.Process(target=_worker_main, daemon=True, name="wiki-parse",
                                 args=(child, progress, self.parser, self.parser_args, self.page_timeout))
        proc.start()
        child.close()
        return _Worker(proc, parent, progress)

    def _send(self, w: _Worker, task: _Task) -> None:
        w.task = task
        w.progress[0], w.progress[1] = 0, 0.0
        w.conn.send(task.items)

    def _kill(self, w: _Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(5)
        w.conn.close()

    def close(self) -> None:
        for w in self._pool:
            if w.task is None and w.proc.is_alive():
                try:
                    w.conn.send(None)
                except OSError:
                    pass
        deadline = time.monotonic() + 2
        for w in self._pool:
            if w.task is None:
                w.proc.join(max(0.0, deadline - time.monotonic()))
            self._kill(w)
        self._pool = []

    # -- the ordered map
    def imap(self, chunks: Iterable[tuple[list[tuple[str, str]], Any]]) -> Iterator[tuple[list[Page | Skip], Any]]:
        """For each ``(items, extra)``: ``(results in item order, extra)``, in input order."""
        source = iter(chunks)
        pending: dict[int, _Chunk] = {}
        retry: deque[_Task] = deque()
        yield_seq = 0
        state = {"next_seq": 0, "exhausted": False}

        def next_task() -> _Task | None:
            if retry:
                return retry.popleft()
            while not state["exhausted"] and len(pending) < self.max_pending:
                nxt = next(source, None)
                if nxt is None:
                    state["exhausted"] = True
                    return None
                items, extra = nxt
                seq = state["next_seq"]
                state["next_seq"] += 1
                pending[seq] = _Chunk([None] * len(items), len(items), extra)
                if items:
                    return _Task(seq, 0, list(items))
            return None

        try:
            while True:
                # Workers start only when there is work for them (parser args may be filled
                # by the first chunk's read, e.g. the dump's namespace names).
                for i in range(self.workers):
                    w = self._pool[i] if i < len(self._pool) else None
                    if w is not None and w.task is not None:
                        continue
                    task = next_task()
                    if task is None:
                        break
                    if w is None:
                        w = self._spawn()
                        self._pool.append(w)
                    self._send(w, task)
                while yield_seq in pending and pending[yield_seq].remaining == 0:
                    done = pending.pop(yield_seq)
                    yield done.slots, done.extra  # type: ignore[misc]
                    yield_seq += 1
                if state["exhausted"] and not pending:
                    return
                self._wait_and_collect(pending, retry)
        finally:
            self.close()

    def _fill(self, pending: dict[int, _Chunk], seq: int, offset: int, results: list[Page | Skip]) -> None:
        chunk = pending[seq]
        for j, r in enumerate(results):
            chunk.slots[offset + j] = r
            if isinstance(r, Skip):
                self.stats.skipped.append(r)
        chunk.remaining -= len(results)

    def _wait_and_collect(self, pending: dict[int, _Chunk], retry: deque[_Task]) -> None:
        busy = [w for w in self._pool if w.task is not None]
        if not busy:
            return
        ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                         timeout=min(0.5, self.hard_limit / 4)))
        now = time.monotonic()
        for w in busy:
            task = w.task
            assert task is not None
            if w.conn in ready or w.proc.sentinel in ready:
                try:
                    if w.conn.poll():
                        results = w.conn.recv()
                        w.task = None
                        self._fill(pending, task.seq, task.offset, results)
                        continue
                except (EOFError, OSError):
                    pass
                if not w.proc.is_alive():
                    self._recover(w, pending, retry, "crash",
                                  f"parser worker crashed (exit code {w.proc.exitcode})")
                    continue
            started = w.progress[1]
            if started and now - started > self.hard_limit:
                self._recover(w, pending, retry, "stuck",
                              f"parser stuck past {self.hard_limit:g}s (worker killed and replaced)")

    def _recover(self, w: _Worker, pending: dict[int, _Chunk], retry: deque[_Task], kind: str, reason: str) -> None:
        """Replace worker ``w``; skip the page it was on; resubmit the rest of its task."""
        task = w.task
        assert task is not None
        running = bool(w.progress[1])
        idx = int(w.progress[0])
        self._kill(w)
        self.stats.restarts += 1
        fresh = self._spawn()
        self._pool[self._pool.index(w)] = fresh
        if running and 0 <= idx < len(task.items):
            self._fill(pending, task.seq, task.offset + idx, [Skip(task.items[idx][0], reason, kind)])
            before = _Task(task.seq, task.offset, task.items[:idx])
            after = _Task(task.seq, task.offset + idx + 1, task.items[idx + 1:])
            retry.extendleft(t for t in (after, before) if t.items)
        elif task.attempts < 1:  # died between pages (e.g. sending results): try the task once more
            retry.appendleft(_Task(task.seq, task.offset, task.items, task.attempts + 1))
        else:
            self._fill(pending, task.seq, task.offset, [Skip(t, reason, kind) for t, _ in task.items])
