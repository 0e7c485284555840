"""Parse pages in worker processes, in order, with a per-page time limit that always holds.

The main process reads the dump and hands chunks of ``(title, wikitext)`` to workers
(:mod:`wiki_sim.ingest.worker`, each a fresh interpreter on two pipes); results come back
in submission order, so a build is deterministic whatever the number of workers. Two
guards bound the time one page can take:

- in the worker, ``SIGALRM`` interrupts a page after ``page_timeout`` seconds; the page
  is reported as skipped and the worker moves on;
- in the main process, a watchdog follows each worker's ``start`` messages (which page,
  since when). A worker still on one page ``hard_grace`` seconds past its limit (the
  parser is stuck in C code that never lets the signal handler run) is killed and
  replaced; that page is skipped and the rest of its chunk is submitted again. A worker
  that dies (a crash in C code) is handled the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, BinaryIO, Iterable, Iterator

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest.worker import Skip, recv_msg, send_msg
from wiki_sim.records import Page

DEFAULT_PARSER = "wiki_sim.ingest.wikitext:parse_page"


@dataclass
class _Task:
    seq: int
    offset: int
    items: list[tuple[str, str]]
    attempts: int = 0


@dataclass
class _Worker:
    proc: subprocess.Popen
    rfd: int
    out: BinaryIO
    ready: bool = False
    task: _Task | None = None
    index: int = 0
    started: float = 0.0
    """``time.monotonic()`` when the current page started; 0 between pages."""


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

    Use :meth:`imap`; workers start with the first chunk and stop when it ends (or is closed).
    ``parser`` is ``'module:function'``, imported in the workers; ``parser_args`` are pickled.
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
        self._pool: list[_Worker] = []

    # -- worker processes
    def _spawn(self) -> _Worker:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # The worker must import what this process can (the package, a test's parser hook).
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            proc = subprocess.Popen([sys.executable, "-m", "wiki_sim.ingest.worker", str(to_child_r),
                                     str(from_child_w)], pass_fds=(to_child_r, from_child_w),
                                    stdin=subprocess.DEVNULL, env=env,
                                    # Ctrl-C is for this process (which then stops the workers);
                                    # a worker outliving it sees its pipe close and exits.
                                    start_new_session=True)
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        w = _Worker(proc, from_child_r, os.fdopen(to_child_w, "wb"))
        self._send(w, {"parser": self.parser, "args": self.parser_args, "page_timeout": self.page_timeout})
        return w

    def _send(self, w: _Worker, msg: Any) -> None:
        try:
            send_msg(w.out, msg)
        except BrokenPipeError:
            pass  # the worker died; reading its pipe reports it (EOF)

    def _assign(self, w: _Worker, task: _Task) -> None:
        w.task, w.index, w.started = task, 0, 0.0
        self._send(w, task.items)

    def _kill(self, w: _Worker) -> None:
        if w.proc.poll() is None:
            w.proc.kill()
        w.proc.wait()
        self._close_pipes(w)

    @staticmethod
    def _close_pipes(w: _Worker) -> None:
        try:
            w.out.close()
        except OSError:
            pass
        try:
            os.close(w.rfd)
        except OSError:
            pass

    def close(self) -> None:
        """Stop idle workers politely, kill busy ones."""
        for w in self._pool:
            if w.task is None:
                self._send(w, None)
        deadline = time.monotonic() + 2
        for w in self._pool:
            if w.task is None:
                try:
                    w.proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
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
                    self._assign(w, task)
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
        ready = set(wait([w.rfd for w in busy], timeout=min(0.5, self.hard_limit / 4)))
        for w in busy:
            while w.rfd in ready and w.task is not None:
                try:
                    msg = recv_msg(w.rfd)
                except (EOFError, OSError):
                    self._on_death(w, pending, retry)
                    break
                self._handle(w, msg, pending)
                ready = ready if wait([w.rfd], timeout=0) else ready - {w.rfd}
        now = time.monotonic()
        for w in busy:
            if w.task is not None and w.started and now - w.started > self.hard_limit:
                self._recover(w, pending, retry, "stuck",
                              f"parser stuck past {self.hard_limit:g}s (worker killed and replaced)")

    def _handle(self, w: _Worker, msg: tuple, pending: dict[int, _Chunk]) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
        elif kind == "start":
            w.index, w.started = msg[1], msg[2]
        elif kind == "done":
            task, w.task, w.started = w.task, None, 0.0
            assert task is not None
            self._fill(pending, task.seq, task.offset, msg[1])

    def _on_death(self, w: _Worker, pending: dict[int, _Chunk], retry: deque[_Task]) -> None:
        code = w.proc.wait()
        if not w.ready:
            self._kill(w)
            raise WikiSimError(f"a parser worker failed to start (exit code {code}); its error is printed above")
        self._recover(w, pending, retry, "crash", f"parser worker crashed (exit code {code})")

    def _recover(self, w: _Worker, pending: dict[int, _Chunk], retry: deque[_Task], kind: str, reason: str) -> None:
        """Replace worker ``w``; skip the page it was on; resubmit the rest of its task."""
        task = w.task
        assert task is not None
        running, idx = bool(w.started), w.index
        self._kill(w)
        self.stats.restarts += 1
        self._pool[self._pool.index(w)] = self._spawn()
        if running and 0 <= idx < len(task.items):
            self._fill(pending, task.seq, task.offset + idx, [Skip(task.items[idx][0], reason, kind)])
            before = _Task(task.seq, task.offset, task.items[:idx])
            after = _Task(task.seq, task.offset + idx + 1, task.items[idx + 1:])
            retry.extendleft(t for t in (after, before) if t.items)
        elif task.attempts < 1:  # died between pages (e.g. sending results): try the task once more
            retry.appendleft(_Task(task.seq, task.offset, task.items, task.attempts + 1))
        else:
            self._fill(pending, task.seq, task.offset, [Skip(t, reason, kind) for t, _ in task.items])
