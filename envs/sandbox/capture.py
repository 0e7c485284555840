"""Reading a child's stdout and stderr under a wall-clock deadline, keeping bounded output.

The child may print without end; only the head and the tail of each stream are kept
(``cap`` bytes in all), everything between is counted and dropped, so the caller's memory
stays bounded however much is written.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

_CHUNK = 65536


class HeadTailBuffer:
    """The first ``cap // 2`` and the last ``cap - cap // 2`` bytes written to it, and the total."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data[-self.tail_cap:] if self.tail_cap else b""
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_cap + self.tail_cap

    def text(self) -> str:
        """The kept bytes as text; a note in the middle says how much was cut."""
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail)
        note = (
            f"\n... [output truncated: {omitted} of {self.total} bytes omitted; "
            f"only the first {len(self.head)} and the last {len(self.tail)} bytes are shown] ...\n"
        )
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        return head + note + tail


@dataclass
class Drained:
    """What :func:`drain` saw: both streams, and whether the deadline killed the child."""

    stdout: HeadTailBuffer
    stderr: HeadTailBuffer
    timed_out: bool


def drain(
    proc: subprocess.Popen, deadline: float, cap: int, exited: Callable[[], bool], kill: Callable[[], None]
) -> Drained:
    """Read ``proc``'s stdout and stderr until both close or ``deadline`` (monotonic) passes.

    ``exited()`` says whether the child has ended. At the deadline ``kill()`` is called (it
    must end every process that holds the pipes) and whatever is still buffered is read.
    Once the child itself has exited the pipes get a short grace period only: a leftover
    grandchild holding them open (possible in unsafe-local mode) must not stall the caller.
    """
    out, err = HeadTailBuffer(cap), HeadTailBuffer(cap)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    timed_out = False
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None and exited():
                exited_at = now
            stop = deadline if exited_at is None else min(deadline, exited_at + 0.5)
            if now >= stop:
                if exited_at is None:
                    timed_out = True
                    kill()
                    _read_rest(sel, grace=1.0)
                break
            for key, _ in sel.select(timeout=min(stop - now, 0.1)):
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data.write(chunk)
                else:
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    return Drained(out, err, timed_out)


def _read_rest(sel: selectors.BaseSelector, grace: float) -> None:
    """After a kill: collect what the pipes still hold, for at most ``grace`` seconds."""
    end = time.monotonic() + grace
    while sel.get_map() and time.monotonic() < end:
        for key, _ in sel.select(timeout=max(0.0, end - time.monotonic())):
            chunk = os.read(key.fd, _CHUNK)
            if chunk:
                key.data.write(chunk)
            else:
                sel.unregister(key.fileobj)
