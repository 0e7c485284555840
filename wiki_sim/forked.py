"""Run one function in a forked process beside this one, and get its result or its exception back.

A build's forward index (:func:`wiki_sim.forward.build_forward_index`, single-threaded Python)
is built while the engine indexes (:func:`wiki_sim.build._build_into`): on 2 cores the forward
index no longer adds its own minute and a half at 1M pages.

``fork``, not a fresh interpreter: the child starts with the parent's modules and memory
(shared copy-on-write), so nothing is pickled on the way in. What it returns or raises is
pickled back; an exception that does not pickle comes back as a :class:`RuntimeError` with its
text; a child that dies without answering (killed, out of memory) is a
:class:`~wiki_sim.errors.WikiSimError` that says so. Fork before starting threads of your own.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any, Callable

from wiki_sim.errors import WikiSimError


def _run(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    start = time.perf_counter()
    try:
        answer: tuple[bool, Any, float] = (True, fn(*args, **kwargs), 0.0)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        answer = (False, exc, 0.0)
    answer = (answer[0], answer[1], round(time.perf_counter() - start, 3))
    try:
        conn.send(answer)
    except Exception:  # noqa: BLE001 - the value or exception does not pickle
        conn.send((False, RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}"), answer[2]))
    finally:
        conn.close()


class Forked:
    """``fn(*args, **kwargs)`` started now in a forked process; ``what`` names it in errors.

    :meth:`result` waits for it and returns its value or raises its exception; :meth:`stop`
    (in a ``finally``) kills it if it is still running. :attr:`seconds`: how long ``fn`` ran."""

    def __init__(self, fn: Callable[..., Any], *args: Any, what: str, **kwargs: Any):
        ctx = multiprocessing.get_context("fork")
        self.what = what
        self.seconds = 0.0
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_run, args=(send, fn, args, kwargs))
        self._proc.start()
        send.close()

    def result(self) -> Any:
        try:
            ok, value, self.seconds = self._recv.recv()
        except EOFError:  # it died without answering
            self._proc.join()
            code = self._proc.exitcode
            how = f"was killed (signal {-code})" if code is not None and code < 0 else f"exited ({code})"
            raise WikiSimError(f"{self.what} process {how} before it finished: out of memory? "
                               "Lower --memory-mb or --workers") from None
        self._proc.join()
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join()
        self._recv.close()
