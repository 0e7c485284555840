"""Watching one started execution: output, deadline, reaping, and killing all of it.

For bubblewrap, "all of it" is the PID namespace. Its init (bubblewrap's monitor, the
process ``--json-status-fd`` names as ``child-pid``) is the one to kill: when a namespace's
init dies, the kernel kills every process in the namespace and waits until they are gone
before the init is fully dead, and only then does the outer bubblewrap, which waits for the
init, exit. (Killing the outer bubblewrap first would also end everything, but
asynchronously: the call could return while the namespace is still being torn down.)

When the program ends by itself, bubblewrap's init reports the exit status to the outer
bubblewrap and the outer one exits at once, while the init is still tearing the namespace
down; :func:`wait_namespace_gone` waits for the init itself, so that no process of the
execution (a daemon it started, say) outlives the call.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from typing import Callable

from envs.sandbox.capture import drain
from envs.sandbox.config import SandboxConfig
from envs.sandbox.result import ExecutionResult, limit_notes


class Reaper:
    """Reaps the child without blocking, so that the deadline can be kept."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def exited(self) -> bool:
        if self.proc.returncode is None:
            try:
                pid, status = os.waitpid(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: nothing more to learn
                self.proc.returncode = -signal.SIGKILL
                return True
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
        return self.proc.returncode is not None

    def wait_until(self, deadline: float) -> bool:
        pause = 0.0005
        while not self.exited():
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return True


class StatusPipe:
    """The JSON objects bubblewrap writes to ``--json-status-fd``: ``child-pid`` once it has
    cloned the namespace's init, ``exit-code`` once the command has run and exited."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = b""
        os.set_blocking(fd, False)

    def read(self) -> dict:
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.fd, 65536):
                self.data += chunk
        merged: dict = {}
        decoder, text, pos = json.JSONDecoder(), self.data.decode("utf-8", errors="replace"), 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                return merged
            try:
                obj, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:  # an object still being written
                return merged
            if isinstance(obj, dict):
                merged.update(obj)


def kill_namespace(proc: subprocess.Popen, reaper: Reaper, status: StatusPipe) -> None:
    """Kill the sandbox's PID namespace through its init, then wait for bubblewrap to exit.

    Called only while ``proc`` is unreaped. The init is checked to still be bubblewrap's
    child through a pidfd (so a recycled pid is never signalled); if the init is not known
    yet, or bubblewrap does not exit, its whole process group is killed instead.
    """
    init_pid = status.read().get("child-pid")
    if isinstance(init_pid, int) and _kill_child_of(init_pid, proc.pid):
        if reaper.wait_until(time.monotonic() + 5.0):
            return
    kill_group(proc)
    reaper.wait_until(float("inf"))


def wait_namespace_gone(status: StatusPipe, timeout: float = 5.0) -> bool:
    """Wait until the sandbox's PID namespace init has exited, hence every process in it.

    The pid is checked to still belong to that namespace (by the namespace's inode number,
    which bubblewrap reports) after a pidfd pins it, so a recycled pid is never waited for.
    Returns False only if the init was still there after ``timeout`` seconds.
    """
    info = status.read()
    pid, namespace = info.get("child-pid"), info.get("pid-namespace")
    if not isinstance(pid, int):
        return True
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # already gone
        return True
    try:
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") != f"pid:[{namespace}]":
                return True  # the pid now names another process: the init is gone
        except OSError:
            pass  # gone, or not ours to inspect: a bounded wait is harmless either way
        readable, _, _ = select.select([pidfd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(pidfd)


def _kill_child_of(pid: int, parent: int) -> bool:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        if ppid != parent:
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except (OSError, ValueError, IndexError):
        return False
    finally:
        os.close(pidfd)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (it was started in a new session, so the group is its)."""
    if proc.returncode is None:  # an unreaped child's pid, hence group id, cannot be recycled
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def collect(
    proc: subprocess.Popen, start: float, cfg: SandboxConfig, reaper: Reaper, kill: Callable[[], None]
) -> ExecutionResult:
    """Read the output under the deadline, wait for the end, and describe what happened."""
    deadline = start + cfg.wall_seconds
    drained = drain(proc, deadline, cfg.output_cap_bytes, reaper.exited, kill)
    timed_out = drained.timed_out
    if not reaper.wait_until(deadline):  # it closed its output but kept running
        timed_out = True
        kill()
        reaper.wait_until(float("inf"))
    exit_code, signum = decode_status(proc.returncode)
    result = ExecutionResult(
        stdout=drained.stdout.text(),
        stderr=drained.stderr.text(),
        exit_code=None if timed_out or signum is not None else exit_code,
        signal=None if timed_out else signum,
        timed_out=timed_out,
        stdout_bytes=drained.stdout.total,
        stderr_bytes=drained.stderr.total,
        truncated=drained.stdout.truncated or drained.stderr.truncated,
        duration_s=time.monotonic() - start,
    )
    result.notes = limit_notes(result, cfg)
    return result


def decode_status(code: int) -> tuple[int, int | None]:
    """(exit code, signal): Popen gives -N for a signal; bubblewrap passes on 128 + N."""
    if code < 0:
        return code, -code
    if 128 < code < 128 + 65:
        return code, code - 128
    return code, None
