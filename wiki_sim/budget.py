"""A build's memory budget: what this process holds, and what is left for the next stage."""

from __future__ import annotations

import os

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
