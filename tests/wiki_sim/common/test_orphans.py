"""A pool's workers end with their parent: killed with SIGKILL in the middle of a long job, the parent
leaves no worker running (the evaluation pool of the pipeline, a plain pool with the initializer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# The parent: starts a pool, reports its worker's pid, and sits in a 10-minute job until it is killed.
PARENTS = {
    "eval_pool": """
import os, time
from websailor.stages import eval_pool
pool = eval_pool(1)
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 600).result()
""",
    "fork_pool": """
import multiprocessing, os, time
from wiki_sim.common.orphans import exit_with_parent
pool = multiprocessing.get_context("fork").Pool(1, initializer=exit_with_parent, initargs=(os.getpid(),))
print(pool.apply(os.getpid), flush=True)
pool.apply(time.sleep, (600,))
""",
    "no_initializer": """
import multiprocessing, os, time
pool = multiprocessing.get_context("fork").Pool(1)
print(pool.apply(os.getpid), flush=True)
pool.apply(time.sleep, (600,))
""",
}


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaps has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _orphan_after_kill(code: str, wait: float) -> tuple[int, bool]:
    """Run ``code`` as a parent, SIGKILL it once its worker is busy; the worker's pid and whether it still
    runs ``wait`` seconds later."""
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.5)  # the 10-minute job has started
        assert _running(worker)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + wait
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _running(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    return worker, alive


@pytest.mark.parametrize("pool", ["eval_pool", "fork_pool"])
def test_workers_end_when_their_parent_is_killed(pool):
    _, alive = _orphan_after_kill(PARENTS[pool], wait=30)
    assert not alive


def test_without_the_initializer_the_worker_outlives_its_parent():
    """The control: what the initializer prevents does happen without it."""
    _, alive = _orphan_after_kill(PARENTS["no_initializer"], wait=3)
    assert alive
