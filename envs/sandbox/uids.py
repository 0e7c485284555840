"""A host uid per concurrent execution, when the caller is root.

The kernel does not enforce RLIMIT_NPROC for processes whose real uid is root, so a fork
bomb run as root inside a user namespace would still run away. Each execution therefore
starts bubblewrap as an unprivileged host uid. A uid is held through an exclusive
``flock`` on a per-uid lock file, so that concurrent executions, in this process or in
other processes on the host, never share one (shared uids would share process counts on
kernels older than 5.14, and could signal each other's processes).
"""

from __future__ import annotations

import fcntl
import os
import random
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from envs.sandbox.config import SandboxUnavailableError


def lock_dir() -> Path:
    """Where the per-uid lock files live (private to root)."""
    path = Path(tempfile.gettempdir()) / "websailor-sandbox-uids"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextmanager
def hold_uid(base: int, count: int) -> Iterator[int]:
    """Lock one free uid in ``[base, base + count)`` for the duration of the block."""
    directory = lock_dir()
    start = random.randrange(count)
    for i in range(count):
        uid = base + (start + i) % count
        fd = os.open(directory / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)  # closing the descriptor releases the lock
        return
    raise SandboxUnavailableError(
        f"all {count} sandbox uids from {base} are busy: raise SandboxConfig.uid_count "
        f"or run fewer concurrent executions"
    )
