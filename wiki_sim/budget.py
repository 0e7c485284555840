"""A build's memory budget: what this process holds, and what is left for the next stage."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from wiki_sim.errors import WikiSimError


def resident_bytes() -> int:
    """This process's resident memory now (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def check_budget(memory_bytes: int, need_bytes: int, what: str) -> int:
    """The part of ``memory_bytes`` left beside this process's resident memory; a
    :class:`WikiSimError` (out of memory budget) if less than ``need_bytes`` is left."""
    held = resident_bytes()
    if memory_bytes - held < need_bytes:
        raise WikiSimError(f"out of memory budget: the build process holds {held >> 20} MB before {what}, which "
                           f"needs {need_bytes >> 20} MB more; --memory-mb {memory_bytes >> 20} is too small, "
                           f"give at least {(held + need_bytes) // 2 ** 20 + 1}")
    return memory_bytes - held


def peak_resident_bytes() -> int:
    """The largest resident memory this process has held so far (``VmHWM``; 0 where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the operating system (glibc's ``malloc_trim``).

    Building the link tables frees hundreds of MB of temporaries that glibc keeps mapped (136 MB
    at 1M pages); call this before forking workers, which would otherwise share that dead weight
    in every process's memory figures and hold it for the whole pass. ``False`` where the C
    library has no ``malloc_trim`` (not glibc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True


def tree_resident_bytes(pid: int | None = None) -> int:
    """Resident memory of process ``pid`` (this one by default) and all its descendants now
    (0 where /proc is missing)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo, seen = 0, [pid or os.getpid()], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


class PeakMemory:
    """The largest resident memory of this process and its descendants together while the
    ``with`` block runs: sampled every ``interval`` seconds, and never below this process's
    own high-water mark (``VmHWM``) or the largest finished child's (``RUSAGE_CHILDREN``) when
    they rise inside the block, which catch peaks between samples."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    def __enter__(self) -> "PeakMemory":
        self._marks = (peak_resident_bytes(), _children_peak())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> int:
        own, children = peak_resident_bytes(), _children_peak()
        self.peak = max(self.peak, tree_resident_bytes(), own if own > self._marks[0] else 0,
                        children if children > self._marks[1] else 0)
        return self.peak


def _children_peak() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
