"""Which task each episode gets: task files iterated in epochs, grouped for GRPO.

A trainer hands the tasks to the environments itself (``reset(options={"task": ...})``, or
``vec.set_attr("next_task", [...])`` for the sub-environments of a vector environment);
this module only decides the order.
"""

from __future__ import annotations

import os
import random
from typing import Any, Iterator, Mapping, Sequence

from envs.tasks import Task, load_tasks


def iter_task_epochs(tasks: str | os.PathLike | Sequence[Mapping[str, Any] | Task], epochs: int | None = 1, *,
                     shuffle: bool = True, seed: int = 0) -> Iterator[tuple[int, Task]]:
    """``(epoch, task)`` for every task, epoch after epoch (``epochs=None``: forever).

    Each epoch visits every task once; with ``shuffle`` in a fresh order drawn from ``seed``
    and the epoch number, so a run is reproducible and a resumed run can skip ahead.
    """
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
        raise ValueError(f"epochs must be a positive integer or None, got {epochs!r}")
    loaded = load_tasks(tasks)
    epoch = 0
    while epochs is None or epoch < epochs:
        order = list(range(len(loaded)))
        if shuffle:
            random.Random(f"{seed}:{epoch}").shuffle(order)
        for i in order:
            yield epoch, loaded[i]
        epoch += 1


def group_assignment(tasks: Sequence[Task | Mapping[str, Any]], group_size: int) -> list[Task | Mapping[str, Any]]:
    """One task per sub-environment: each task repeated ``group_size`` times, group after
    group (``[t0, t0, t1, t1]`` for two tasks and groups of 2), as ``vec.set_attr("next_task", ...)`` takes."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    return [task for task in tasks for _ in range(group_size)]
