"""Stopping a training run cleanly: SIGINT or SIGTERM asks the loop to stop after the current step,
which then saves a checkpoint and raises :class:`TrainingInterrupted`; a second signal stops at once.

The loop polls :attr:`StopRequest.requested` between steps (a step is never cut in half, so the
checkpoint is that of a finished step and ``--resume`` continues with the same next steps).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Raised after the checkpoint of an interrupted run is written; ``str()`` says where and how to resume."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class StopRequest:
    """Context manager: while active, SIGINT/SIGTERM set :attr:`signum` instead of raising at once.

    Outside the main thread (where Python cannot install handlers) it does nothing and the
    default behaviour stays.
    """

    def __init__(self, what: str = "training"):
        self.what = what
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second one: stop now, without a checkpoint
            raise KeyboardInterrupt
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: {self.what} stops after this step and saves a checkpoint "
              "(send it again to stop at once)", file=sys.stderr, flush=True)

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
