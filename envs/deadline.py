"""Running a tool call under a wall-clock deadline: :class:`DeadlineRunner`.

Python cannot stop a thread, so a call that misses its deadline is *abandoned*: the caller
gets :class:`ToolTimeout` at once and the call runs on in its worker thread until it ends
by itself (its result is dropped). Abandoned calls are bounded: while ``max_abandoned`` of
them are still running, a new call is refused at once with :class:`ToolBusy` instead of
starting another thread. One runner thus holds at most ``max_abandoned + 1`` threads,
whatever the tools do.

Calls run one at a time in one long-lived worker thread, so tools that keep per-thread
state (a SQLite connection per thread, say) keep it warm from call to call; the worker is
replaced only when a call is abandoned.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

_STOP = object()


class ToolTimeout(Exception):
    """The call did not finish within its deadline (it was abandoned, still running)."""


class ToolBusy(Exception):
    """Too many earlier calls are still running past their deadlines; the call was not started."""


class _Job:
    __slots__ = ("fn", "done", "value", "error")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class _Worker:
    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            if job is _STOP:
                return
            try:
                job.value = job.fn()
            except BaseException as exc:  # handed to the caller, who decides what it means
                job.error = exc
            finally:
                job.done.set()
                job = None  # drop the result before waiting for the next job


class DeadlineRunner:
    """Runs callables in a worker thread, each under a deadline; thread-safe.

    Args:
        max_abandoned: calls still running past their deadline at which new calls are refused.
        name: the worker threads' name (shows in thread dumps).
    """

    def __init__(self, max_abandoned: int = 4, name: str = "tool-call") -> None:
        if isinstance(max_abandoned, bool) or not isinstance(max_abandoned, int) or max_abandoned < 1:
            raise ValueError(f"max_abandoned must be an integer >= 1, got {max_abandoned!r}")
        self.max_abandoned = max_abandoned
        self.name = name
        self._lock = threading.Lock()
        self._idle: _Worker | None = None
        self._abandoned: list[_Worker] = []
        self._closed = False

    def abandoned(self) -> int:
        """Calls abandoned at their deadline that are still running."""
        with self._lock:
            self._abandoned = [w for w in self._abandoned if w.thread.is_alive()]
            return len(self._abandoned)

    def run(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """``fn()``'s value (or its exception, re-raised) if it ends within ``timeout_s``
        seconds; :class:`ToolTimeout` if not, :class:`ToolBusy` if too many abandoned calls
        are still running, ``RuntimeError`` after :meth:`close`."""
        if self.abandoned() >= self.max_abandoned:
            raise ToolBusy(f"{self.max_abandoned} earlier calls are still running past their deadline")
        with self._lock:
            if self._closed:
                raise RuntimeError("the tool runner is closed")
            worker, self._idle = self._idle or _Worker(self.name), None
        job = _Job(fn)
        worker.jobs.put(job)
        if not job.done.wait(timeout_s):
            worker.jobs.put(_STOP)  # ends the thread once the abandoned call returns
            with self._lock:
                self._abandoned.append(worker)
            raise ToolTimeout(f"no answer within {timeout_s:g} s")
        with self._lock:
            if self._closed or self._idle is not None:  # another thread's worker is idle already
                worker.jobs.put(_STOP)
            else:
                self._idle = worker
        if job.error is not None:
            error, job.error = job.error, None
            raise error
        return job.value

    def close(self) -> None:
        """Stop the idle worker; abandoned ones stop when their calls return."""
        with self._lock:
            self._closed = True
            if self._idle is not None:
                self._idle.jobs.put(_STOP)
                self._idle = None
