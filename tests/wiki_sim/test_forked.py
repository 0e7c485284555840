"""Forked: a function run in a forked process gives back its value, its exception, or says it died."""

from __future__ import annotations

import errno
import os
import signal

import pytest

from wiki_sim.errors import WikiSimError
from wiki_sim.forked import Forked


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("no")


def _add(a, b, *, c=0):
    return [a + b + c, os.getpid()]


def _raise(kind):
    if kind == "disk":
        raise OSError(errno.ENOSPC, "No space left on device")
    if kind == "memory":
        raise MemoryError()
    raise _Unpicklable("odd failure")


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def test_value_comes_back_from_another_process():
    job = Forked(_add, 1, 2, c=3, what="adding")
    try:
        value, pid = job.result()
    finally:
        job.stop()
    assert value == 6 and pid != os.getpid() and job.seconds >= 0


@pytest.mark.parametrize("kind, expected", [("disk", OSError), ("memory", MemoryError), ("odd", RuntimeError)])
def test_its_exception_is_raised_here(kind, expected):
    job = Forked(_raise, kind, what="failing")
    with pytest.raises(expected) as err:
        job.result()
    job.stop()
    if kind == "disk":
        assert err.value.errno == errno.ENOSPC  # the build's out-of-disk message needs it
    if kind == "odd":
        assert "_Unpicklable: odd failure" in str(err.value)


def test_a_killed_process_says_so():
    job = Forked(_die, what="the forward index")
    with pytest.raises(WikiSimError, match=r"the forward index process was killed \(signal 9\).*out of memory"):
        job.result()
    job.stop()


def test_stop_kills_a_process_still_running():
    import time

    job = Forked(time.sleep, 60, what="sleeping")
    started = time.monotonic()
    job.stop()
    assert time.monotonic() - started < 10 and not job._proc.is_alive()
