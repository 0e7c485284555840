"""Searches that run at once, in helper processes: threads of one process search in parallel.

A search is mostly Python (query analysis, re-ranking, snippets), so threads of one process
that search at once take turns on Python's global interpreter lock: 8 threads on 2 cores
got 1.0-1.2x the throughput of one (benchmarks/search.py). :class:`SearchProcesses` runs a
search in the calling thread when no other search is running there, and otherwise hands it
to a helper process that has the same simulator open (``python -m
wiki_sim.search_processes DIR``, a plain subprocess: nothing of the caller's main module
is re-run). The calling thread waits on a pipe, outside the lock, while the helper
searches on another core.

The helpers start on the first contended search (a program that searches from one thread
never starts one), answer exactly what the calling process would (the same code on the
same files; a helper that finds another build in the directory refuses to start), and end
when their pipe closes. A helper that fails or dies is dropped and its search runs in the
calling thread: a search never fails for want of a helper; the next contended search
starts a replacement. One pool of helpers serves every simulator object of a process that
is open on the same folder (about 77 MB resident, 44 MB private, per helper on the default
simulator; :func:`default_processes` helpers per folder).
"""

from __future__ import annotations

import marshal
import os
import struct
import select
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, Callable

from wiki_sim.search import Hit, SearchResults

# A helper that has not answered in this many seconds is dropped (the search then runs in
# the calling thread). A search takes milliseconds; this only bounds a wedged helper.
ANSWER_SECONDS = 60.0
# A helper that is not ready (imports, simulator opened) in this many seconds is not used.
START_SECONDS = 120.0
# Longest message either side may send (a query; a result of k hits with their snippets).
MAX_MESSAGE_BYTES = 16 << 20
_LENGTH = struct.Struct(">I")


def write_message(pipe: Any, value: Any) -> None:
    """One message: its length (4 bytes), then ``value`` marshalled (plain data only; the
    two ends are this module in a parent and its own child, so marshal's speed is safe)."""
    data = marshal.dumps(value)
    pipe.write(_LENGTH.pack(len(data)) + data)
    pipe.flush()


def read_message(pipe: Any) -> Any:
    """The next message from ``pipe``; :class:`HelperGone` at its end or on a bad message."""
    head = pipe.read(_LENGTH.size)
    if len(head) != _LENGTH.size:
        raise HelperGone("helper pipe closed")
    (size,) = _LENGTH.unpack(head)
    if size > MAX_MESSAGE_BYTES:
        raise HelperGone(f"message of {size} bytes, over {MAX_MESSAGE_BYTES}")
    data = pipe.read(size)
    if len(data) != size:
        raise HelperGone("helper pipe closed mid-message")
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError) as exc:
        raise HelperGone(f"unreadable message: {exc}") from None


def default_processes() -> int:
    """Helper processes by default: one per core, at most 4 (the calling process is one
    more searcher)."""
    return max(1, min(4, os.cpu_count() or 1))


class HelperGone(Exception):
    """A helper process failed, died or did not answer in time."""


class _Pending:
    """A request sent to a helper, answered by its reader thread (which releases ``done``;
    a bare lock is much cheaper than an Event for this one-shot signal)."""

    __slots__ = ("done", "answer")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.answer: Any = None


class _Helper:
    """One helper process. Requests from any number of threads are queued in its pipe (the
    helper never waits between two searches for the calling process to be scheduled) and
    answered in order; a reader thread hands each answer to the thread that asked."""

    def __init__(self, path: Path, snippet_chars: int, fingerprint: str):
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wiki_sim.search_helper", str(path), str(snippet_chars), fingerprint],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root)
        self._write_lock = threading.Lock()  # order of requests in the pipe = order in _pending
        self._lock = threading.Lock()
        self._pending: deque[_Pending] = deque()
        self.alive = True
        try:
            if not select.select([self.proc.stdout], [], [], START_SECONDS)[0]:
                raise HelperGone(f"helper not ready in {START_SECONDS:.0f} s")
            ready = read_message(self.proc.stdout)
            if ready != {"ready": True}:
                why = ready.get("error", ready) if isinstance(ready, dict) else ready
                raise HelperGone(f"helper did not start: {why}")
        except HelperGone:
            self.close()
            raise
        threading.Thread(target=self._read_answers, name="wiki-sim-search-helper-reader", daemon=True).start()

    def _read_answers(self) -> None:
        try:
            while True:
                answer = read_message(self.proc.stdout)
                with self._lock:
                    pending = self._pending.popleft()
                pending.answer = answer
                pending.done.release()
        except (HelperGone, OSError, ValueError, IndexError):
            pass
        finally:
            with self._lock:
                self.alive = False
                failed, self._pending = list(self._pending), deque()
            for pending in failed:  # answer None: the asking thread searches itself
                pending.done.release()

    def outstanding(self) -> int:
        return len(self._pending)

    def search(self, query: str, k: int) -> SearchResults:
        pending = _Pending()
        with self._write_lock:
            with self._lock:
                if not self.alive:
                    raise HelperGone("helper process gone")
                self._pending.append(pending)
            try:
                write_message(self.proc.stdin, (query, k))
            except (OSError, ValueError) as exc:
                self.kill()
                raise HelperGone(f"helper process gone: {exc}") from None
        if not pending.done.acquire(timeout=ANSWER_SECONDS):
            self.kill()
            raise HelperGone(f"helper did not answer in {ANSWER_SECONDS:.0f} s")
        answer = pending.answer
        if not isinstance(answer, tuple) or len(answer) != 2:
            raise HelperGone(f"helper failed: {answer!r:.200}")
        results = SearchResults(Hit(*hit) for hit in answer[0])
        results.corrected_query = answer[1]
        return results

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self) -> None:
        """End the helper: its stdin closed, it exits (killed after 5 s)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:  # after the process is gone: the reader thread has seen the end of the pipe
            self.proc.stdout.close()
        except OSError:
            pass


MAX_RESTARTS_PER_HELPER = 4
"""A pool restarts helpers that die or fail, up to this many times its size over its life (a
helper that keeps dying is not restarted for ever: its searches then run in the calling thread)."""


class _Pool:
    """The helper processes of one simulator folder (one build, one snippet length) in this
    process, shared by every :class:`SearchProcesses` handle open on it and counted: the last
    handle closed ends the helpers. A helper that dies is dropped and a new one started on the
    next search that would use one (within :data:`MAX_RESTARTS_PER_HELPER`)."""

    def __init__(self, path: Path, processes: int, snippet_chars: int, fingerprint: str):
        self.path, self.processes, self.snippet_chars, self.fingerprint = path, processes, snippet_chars, fingerprint
        self.helpers: list[_Helper] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.starting = 0  # helpers being started now
        self.started = False  # whether helpers were ever asked for
        self.closed = False
        self.failures = 0  # helpers that failed to start or died
        self.helper_searches = 0  # searches that helpers answered
        self.refs = 0

    def pick(self) -> _Helper | None:
        """The serving helper with the fewest queued searches; ``None``: search here. Dead
        helpers are dropped first, and missing ones (re)started in the background."""
        with self.lock:
            dead = [h for h in self.helpers if h.proc.poll() is not None]
        for helper in dead:
            self.drop(helper)
        self.start_missing()
        with self.lock:
            if not self.helpers:
                return None
            return min(self.helpers, key=_Helper.outstanding)

    def start_missing(self) -> None:
        """Start helpers in the background up to ``processes``; each serves once it is ready."""
        with self.lock:
            budget = self.processes * (1 + MAX_RESTARTS_PER_HELPER) - self.failures - len(self.helpers)
            missing = min(self.processes - len(self.helpers) - self.starting, budget)
            if self.closed or missing <= 0:
                return
            self.started = True
            self.starting += missing

        def start() -> None:
            for _ in range(missing):
                try:
                    helper = _Helper(self.path, self.snippet_chars, self.fingerprint)
                except (OSError, HelperGone):
                    with self.lock:
                        self.failures += 1
                        self.starting -= 1
                    continue
                with self.lock:
                    self.starting -= 1
                    if not self.closed:
                        self.helpers.append(helper)
                        continue
                helper.close()

        threading.Thread(target=start, name="wiki-sim-search-helpers", daemon=True).start()

    def drop(self, helper: _Helper) -> None:
        with self.lock:
            if helper not in self.helpers:
                return  # another thread dropped it
            self.helpers.remove(helper)
            self.failures += 1
        helper.kill()
        helper.close()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            helpers, self.helpers = self.helpers, []
        for helper in helpers:
            helper.close()


_POOLS: dict[tuple, _Pool] = {}
_POOLS_LOCK = threading.Lock()


def _acquire_pool(path: Path, processes: int, snippet_chars: int, fingerprint: str) -> _Pool:
    key = (os.getpid(), str(path.resolve()), processes, snippet_chars, fingerprint)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool.closed:
            pool = _POOLS[key] = _Pool(path, processes, snippet_chars, fingerprint)
        pool.refs += 1
        return pool


def _release_pool(pool: _Pool) -> None:
    with _POOLS_LOCK:
        pool.refs -= 1
        if pool.refs > 0:
            return
        for key, value in list(_POOLS.items()):
            if value is pool:
                del _POOLS[key]
    pool.close()


def live_helpers() -> int:
    """Helper processes serving in this process, all simulators together."""
    with _POOLS_LOCK:
        pools = [p for key, p in _POOLS.items() if key[0] == os.getpid()]
    return sum(len(p.helpers) for p in pools)


class SearchProcesses:
    """Runs a search in the calling thread when no other search is running in this process on
    the same simulator folder, else in the helper process with the fewest searches queued.
    (Also searching in the calling process while helpers serve measured slower: its threads
    then wait for the interpreter lock to take the helpers' answers, and the helpers idle.)

    ``local`` is the in-process search (``(query, k) -> SearchResults``); ``processes`` the
    most helpers (0: every search runs in its calling thread, as many at once as call).
    ``fingerprint`` identifies the build (helpers refuse another one). Until the first
    helper is ready, every search runs in its calling thread.

    **One pool per folder.** Every ``SearchProcesses`` of this process open on the same folder
    (same build, snippet length and ``processes``) shares one pool of helpers: six
    :class:`~wiki_sim.WikiSim` objects on the default simulator start ``processes`` helpers,
    not six times as many. Memory: each helper is a process with the simulator open, about
    53 MB resident on the default simulator after a search, 28 MB of it private (its store pages
    and index files, Whoosh's segment files included, are shared through the page cache). A helper that dies is restarted (see :class:`_Pool`)."""

    def __init__(self, path: str | Path, local: Callable[[str, int], SearchResults], processes: int,
                 snippet_chars: int, fingerprint: str):
        self.path = Path(path)
        self.local = local
        self.processes = processes
        self.snippet_chars = snippet_chars
        self.fingerprint = fingerprint
        self._pid = os.getpid()
        self._pool = _acquire_pool(self.path, processes, snippet_chars, fingerprint) if processes > 0 else None
        self._closed = False

    # What tests and stats read: the shared pool's state.
    @property
    def _helpers(self) -> list[_Helper]:
        return self._pool.helpers if self._pool else []

    @property
    def _starting(self) -> bool:
        return bool(self._pool and self._pool.started)

    @property
    def failures(self) -> int:
        return self._pool.failures if self._pool else 0

    @property
    def helper_searches(self) -> int:
        return self._pool.helper_searches if self._pool else 0

    def search(self, query: str, k: int) -> SearchResults:
        pool = self._pool
        if pool is None or self._closed or os.getpid() != self._pid:  # a forked child must not share the pipes
            return self.local(query, k)
        if len(query) > MAX_MESSAGE_BYTES // 8:  # could not be sent in one message: searched here
            return self.local(query, k)
        with pool.lock:
            alone = pool.in_flight == 0
            pool.in_flight += 1
        try:
            helper = None if alone else pool.pick()
            if helper is None:
                return self.local(query, k)
            try:
                results = helper.search(query, k)
            except HelperGone:
                pool.drop(helper)
                return self.local(query, k)
            with pool.lock:
                pool.helper_searches += 1
            return results
        finally:
            with pool.lock:
                pool.in_flight -= 1

    def _start_helpers(self) -> None:
        """Start the helpers in the background now (they also start on the first contended search)."""
        if self._pool is not None and not self._closed:
            self._pool.start_missing()

    def helpers(self) -> int:
        """How many helper processes are serving (for this folder, in this process)."""
        if self._pool is None:
            return 0
        with self._pool.lock:
            return len(self._pool.helpers)

    def close(self) -> None:
        """Release this handle; the last one closed on a folder ends its helpers."""
        if os.getpid() != self._pid or self._closed:  # a forked child: the helpers are its parent's
            return
        self._closed = True
        if self._pool is not None:
            _release_pool(self._pool)
