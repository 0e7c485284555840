"""Find the links and other names of pages in forked worker processes, results in submission order.

The link pass of a JSONL build (:func:`wiki_sim.ingest.jsonl.iter_jsonl`) is per-page CPU
work over read-only tables (:class:`~wiki_sim.ingest.entity_links.EntityLinker`). The main
process keeps reading the file and writing the store; :class:`LinkPool` hands batches of
``(title, text, lead)`` to ``workers`` processes and gives the results back in the order the
batches came, so a build is the same whatever the number of workers.

Why not :class:`~wiki_sim.ingest.pool.ParsePool` (the dump parser's pool): its workers are
fresh interpreters that receive their arguments pickled. The linker's tables are keyed by
Python's ``hash`` of strings, which is salted per interpreter (``PYTHONHASHSEED``), so a
fresh interpreter could not use them; pickling them to each worker would also hold one copy
per process. Here the workers are ``fork``-ed after the tables are built: they share the
numpy arrays and the title blob copy-on-write (nothing writes to them; ``gc.freeze`` keeps
the collector from touching the parent's objects), and the hash salt is the same.

Bounded: at most ``max_pending`` batches are read ahead of the one the caller is waiting
for. A page that raises in a worker, or a worker that dies (killed, out of memory), stops
the pass with :class:`LinkPassError` naming the batch and the page, which the caller turns
into its ``file:line`` message; the workers are stopped either way.
"""

from __future__ import annotations

import gc
import mmap
import multiprocessing
import os
import queue
import signal
import threading
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Iterable, Iterator

import numpy as np

from wiki_sim.ingest.aliases import page_aliases
from wiki_sim.ingest.entity_links import EntityLinker

WORKER_NICE = 5
"""Niceness added to the link workers (relative to the build process, which reads and stores)."""
PageLinks = tuple[list[tuple[str, str]], list[int], list[tuple[str, str]]]
"""One page's ``(links as (target, anchor), link start offsets, aliases)``."""


def page_links(linker: EntityLinker, title: str, text: str, lead: str) -> PageLinks:
    """What the link pass finds in one page (the same in a worker or in the main process)."""
    found = linker.find(text, title)
    return [(f.target, f.anchor) for f in found], [f.start for f in found], page_aliases(title, lead)


class LinkPassError(Exception):
    """A page of batch ``extra`` (its ``index``-th item, or ``None`` when unknown) failed: ``reason``."""

    def __init__(self, extra: Any, index: int | None, reason: str):
        super().__init__(reason)
        self.extra, self.index, self.reason = extra, index, reason


def _serve(linker: EntityLinker, inbox: Connection, outbox: Connection, progress: np.ndarray, slot: int,
           inherited: list[Connection]) -> None:
    """A worker: ``(seq, items)`` in, ``("done", seq, results)`` or ``("error", seq, i, reason)`` out."""
    for conn in inherited:
        # The build process's ends of this worker's pipes and of earlier workers': held here, they
        # would keep this worker's inbox open after the build process dies, and it would wait forever.
        conn.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the build process's to handle
    # The main process (reading the file, writing the store, in order) is the pipeline's serial
    # part: on a machine with fewer free cores than processes it goes first, workers take the rest.
    os.nice(WORKER_NICE)
    while True:
        try:
            msg = inbox.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        seq, items = msg
        try:
            outbox.send(_work(linker, seq, items, progress, slot))
        except (BrokenPipeError, OSError):
            return  # the build process is gone


def _work(linker: EntityLinker, seq: int, items: list[tuple[str, str, str]], progress: np.ndarray,
          slot: int) -> tuple:
    out: list[PageLinks] = []
    for i, (title, text, lead) in enumerate(items):
        progress[slot] = i  # the main process names this page if the worker dies on it
        try:
            out.append(page_links(linker, title, text, lead))
        except Exception as exc:  # reported, and the pass stops: a build never drops a page silently
            progress[slot] = -1
            return ("error", seq, i, f"{type(exc).__name__}: {exc}"[:300])
    progress[slot] = -1
    return ("done", seq, out)


@dataclass
class _Worker:
    proc: Any
    inbox: Connection
    outbox: Connection
    feed: queue.Queue
    feeder: threading.Thread
    slot: int
    batches: deque[int] = field(default_factory=deque)
    """Sequence numbers sent to it and not answered yet, in the order it works on them."""


def _feed(w_inbox: Connection, feed: queue.Queue) -> None:
    """Send batches to one worker from a thread, so the main process never blocks on a full pipe."""
    while True:
        msg = feed.get()
        try:
            w_inbox.send(msg)
        except (BrokenPipeError, OSError, ValueError):
            return  # the worker died or the pool closed; its result pipe says so
        if msg is None:
            return


class LinkPool:
    """Ordered parallel :func:`page_links` in ``workers`` forked processes; use :meth:`imap` once."""

    def __init__(self, linker: EntityLinker, workers: int = 2, max_pending: int | None = None):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.linker, self.workers = linker, workers
        self.max_pending = max_pending or 3 * workers
        self._pool: list[_Worker] = []
        self._progress: np.ndarray | None = None

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self.linker._compiled()  # built once here, shared by the workers
        self._progress = np.frombuffer(mmap.mmap(-1, 8 * self.workers), dtype=np.int64)
        self._progress[:] = -1
        gc.collect()
        gc.freeze()  # the children's collector leaves the parent's objects (and their pages) alone
        try:
            for slot in range(self.workers):
                in_r, in_w = ctx.Pipe(duplex=False)
                out_r, out_w = ctx.Pipe(duplex=False)
                inherited = [in_w, out_r] + [c for w in self._pool for c in (w.inbox, w.outbox)]
                proc = ctx.Process(target=_serve, args=(self.linker, in_r, out_w, self._progress, slot, inherited),
                                   name=f"link-worker-{slot}", daemon=True)
                proc.start()
                in_r.close()
                out_w.close()
                feed: queue.Queue = queue.Queue()
                feeder = threading.Thread(target=_feed, args=(in_w, feed), daemon=True)
                feeder.start()
                self._pool.append(_Worker(proc, in_w, out_r, feed, feeder, slot))
        finally:
            gc.unfreeze()

    def close(self) -> None:
        """Stop idle workers politely, kill busy ones."""
        for w in self._pool:
            if w.batches:
                w.proc.kill()
            w.feed.put(None)
        for w in self._pool:
            w.proc.join(2)
            if w.proc.exitcode is None:
                w.proc.kill()
                w.proc.join()
            for conn in (w.inbox, w.outbox):
                conn.close()
            w.feeder.join(2)
        self._pool = []

    def imap(self, batches: Iterable[tuple[list[tuple[str, str, str]], Any]]) -> Iterator[tuple[list[PageLinks], Any]]:
        """For each ``(items, extra)``: ``(results in item order, extra)``, in input order."""
        source = iter(batches)
        pending: dict[int, list[Any]] = {}  # seq -> [extra, items, results or None]
        next_seq = yield_seq = 0
        exhausted = False
        self._start()
        try:
            while True:
                while not exhausted and len(pending) < self.max_pending:
                    nxt = next(source, None)
                    if nxt is None:
                        exhausted = True
                        break
                    items, extra = nxt
                    pending[next_seq] = [extra, items, None]
                    w = min(self._pool, key=lambda w: len(w.batches))
                    w.batches.append(next_seq)
                    w.feed.put((next_seq, items))
                    next_seq += 1
                while yield_seq in pending and pending[yield_seq][2] is not None:
                    extra, _, results = pending.pop(yield_seq)
                    yield results, extra
                    yield_seq += 1
                if exhausted and not pending:
                    return
                self._collect(pending)
        finally:
            self.close()

    def _collect(self, pending: dict[int, list[Any]]) -> None:
        busy = {w.outbox: w for w in self._pool if w.batches}
        sentinels = {w.proc.sentinel: w for w in busy.values()}
        for ready in wait(list(busy) + list(sentinels), timeout=1.0):
            w = busy.get(ready)  # type: ignore[call-overload]
            if w is None:
                w = sentinels[ready]
                while w.batches and w.outbox.poll():  # what it sent before it ended
                    self._receive(w, pending)
                if w.batches:
                    self._died(w, pending)
                continue
            if w.batches:
                self._receive(w, pending)

    def _receive(self, w: _Worker, pending: dict[int, list[Any]]) -> None:
        try:
            msg = w.outbox.recv()
        except (EOFError, OSError):
            self._died(w, pending)
            return
        if msg[0] == "error":
            _, seq, index, reason = msg
            raise LinkPassError(pending[seq][0], index, reason)
        _, seq, results = msg
        if not w.batches or w.batches[0] != seq:
            raise RuntimeError(f"link worker {w.slot} answered batch {seq}, expected {list(w.batches)[:1]}")
        w.batches.popleft()
        pending[seq][2] = results

    def _died(self, w: _Worker, pending: dict[int, list[Any]]) -> None:
        w.proc.join(5)
        code = w.proc.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        assert self._progress is not None
        index = int(self._progress[w.slot])
        seq = w.batches[0]
        raise LinkPassError(pending[seq][0], index if 0 <= index < len(pending[seq][1]) else None,
                            f"a link worker died ({how})")
