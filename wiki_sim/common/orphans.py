"""Worker processes that end with their parent.

A pool's workers outlive a parent killed by SIGKILL (or the kernel's OOM killer): a worker that is in
the middle of a long job (an evaluation of hundreds of episodes, a synthesis attempt) runs it to the
end, using the cores a rerun needs and writing into the run folder the rerun is writing too.
:func:`exit_with_parent`, a pool's ``initializer``, stops that: a daemon thread in the worker checks
once a second whether the process that started it is still its parent (a dead parent's children are
handed to init or a subreaper, so ``os.getppid`` changes) and ends the worker at once when not.
"""

from __future__ import annotations

import os
import threading

CHECK_SECONDS = 1.0
"""How often a worker checks its parent."""


def _watch(parent: int, interval: float) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)  # nothing of the worker's is worth finishing: its parent will never read it
        threading.Event().wait(interval)


def exit_with_parent(parent: int, interval: float = CHECK_SECONDS) -> None:
    """In a worker: end this process (exit status 1) once ``parent`` (the pid that started it, passed in
    ``initargs``) is no longer its parent; checked every ``interval`` seconds by a daemon thread."""
    threading.Thread(target=_watch, args=(parent, interval), name="exit-with-parent", daemon=True).start()
