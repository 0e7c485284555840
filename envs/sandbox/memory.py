"""One memory cap for a whole execution: all its processes and its tmpfs mounts together.

RLIMIT_AS bounds each process alone, so four children of 800 MiB pass a 1 GiB limit, and
files in ``/tmp`` and ``/dev/shm`` count for nobody. Two ways to cap the sum, chosen by
``SandboxConfig.memory_limit``:

- ``cgroup``: the kernel enforces it. Each execution gets its own memory cgroup, created
  under the caller's (cgroup v2 when the caller's cgroup delegates the ``memory``
  controller, else the cgroup v1 ``memory`` hierarchy), with ``memory.max`` (v2) or
  ``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` (v1) at the cap and no
  swap. Every page the execution touches is charged to it: heap, page tables, tmpfs and
  memfd files, pipe buffers. Past the cap the kernel reclaims what it can, then kills
  (v2: the whole execution, ``memory.oom.group``; v1: the largest process). Creating
  cgroups needs root or a delegated cgroup v2 subtree. bubblewrap is started paused (a
  ``/bin/sh`` waiting on a pipe), moved into the cgroup, then let go, so that nothing of
  the execution runs outside it.
- ``poll``: a supervisor thread samples the execution every ``POLL_INTERVAL_S``: the
  resident anonymous memory of every process in its PID namespace plus what its ``/tmp``
  and ``/dev/shm`` hold; over the cap, the namespace is killed. It needs no privilege but
  is best effort: a program may run past the cap for one interval (allocating at a few
  GiB/s, some tens of MiB), and memory held where no process maps it (an unmapped memfd,
  pipe buffers) is not seen. RLIMIT_AS still bounds each process.

``auto`` (the default) takes ``cgroup`` when a cgroup can be made here, ``poll`` otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from envs.sandbox.config import MemoryLimitMode, SandboxConfig, SandboxUnavailableError

__all__ = ["CgroupGuard", "MemoryGuard", "MemoryLimitMode", "PollGuard", "cgroup_support", "make_guard"]
POLL_INTERVAL_S = 0.01
_PAGE = os.sysconf("SC_PAGE_SIZE")


class MemoryGuard:
    """The interface both guards share; a guard serves one execution."""

    mode: str = ""
    exceeded: bool = False
    """True when the execution was stopped (or a process of it killed) for going over the cap."""
    peak_bytes: int | None = None
    """Most memory the execution held at once, when known."""

    def attach(self, pid: int) -> None:
        """Called with the started (paused) bubblewrap's pid, before it is let go."""

    def watch(self, pid: int) -> None:
        """Called once bubblewrap runs."""

    def finish(self) -> None:
        """Called after the execution ended; fills ``exceeded`` and ``peak_bytes``; releases everything."""


# --------------------------------------------------------------------------- cgroups


def _own_cgroup() -> tuple[int, Path] | None:
    """(version, directory) of this process's memory cgroup, if one is mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        mount_point, fstype, options = fields[4], extra[0], extra[2].split(",")
        if fstype == "cgroup2" and v2 is not None and Path(mount_point, "cgroup.controllers").is_file():
            base = Path(mount_point, v2.lstrip("/"))
            if "memory" in (base / "cgroup.controllers").read_text().split():
                return 2, base
        if fstype == "cgroup" and v1 is not None and "memory" in options:
            return 1, Path(mount_point, v1.lstrip("/"))
    return None


class CgroupGuard(MemoryGuard):
    """A memory cgroup of its own for one execution (see the module docstring)."""

    mode = "cgroup"

    def __init__(self, cap_bytes: int, where: tuple[int, Path]) -> None:
        self.version, parent = where
        self.cap = cap_bytes
        self.path = parent / f"websailor-sandbox-{uuid.uuid4().hex[:16]}"
        if self.version == 2:
            control = parent / "cgroup.subtree_control"
            if "memory" not in control.read_text().split():
                control.write_text("+memory")  # fails (EBUSY) when the parent holds processes itself
        self.path.mkdir()
        try:
            if self.version == 2:
                self._write("memory.max", cap_bytes)
                with contextlib.suppress(OSError):  # no swap configured: no file
                    self._write("memory.swap.max", 0)
                self._write("memory.oom.group", 1)
            else:
                self._write("memory.limit_in_bytes", cap_bytes)
                with contextlib.suppress(OSError):  # swap accounting off: only RAM is limited, swap may add
                    self._write("memory.memsw.limit_in_bytes", cap_bytes)
                with contextlib.suppress(OSError):
                    self._write("memory.swappiness", 0)
        except BaseException:
            self._remove()
            raise

    def _write(self, name: str, value: int) -> None:
        (self.path / name).write_text(str(value))

    def _read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def attach(self, pid: int) -> None:
        self._write("cgroup.procs", pid)

    def finish(self) -> None:
        if self.version == 2:
            events = dict(line.split() for line in self._read("memory.events").splitlines() if " " in line)
            self.exceeded = int(events.get("oom_kill", 0)) > 0 or int(events.get("oom", 0)) > 0
            peak = self._read("memory.peak").strip()
        else:
            control = dict(line.split() for line in self._read("memory.oom_control").splitlines() if " " in line)
            self.exceeded = int(control.get("oom_kill", 0)) > 0
            peak = self._read("memory.max_usage_in_bytes").strip()
        self.peak_bytes = int(peak) if peak.isdigit() else None
        self._remove()

    def _remove(self) -> None:
        for attempt in range(50):  # the last processes may still be exiting
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                for pid in self._read("cgroup.procs").split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.01 * (attempt + 1))


@functools.lru_cache(maxsize=1)
def cgroup_support() -> tuple[tuple[int, Path] | None, str]:
    """(where execution cgroups can be made, or None; why not), probed once per process."""
    try:
        where = _own_cgroup()
    except (OSError, ValueError) as exc:  # a cgroup path that is not there (another cgroup namespace)
        return None, f"this process's cgroup cannot be read ({exc})"
    if where is None:
        return None, "no cgroup memory controller is mounted for this process"
    try:
        CgroupGuard(64 << 20, where).finish()
    except OSError as exc:
        return None, f"cannot create a memory cgroup under {where[1]} ({exc.strerror or exc})"
    return where, ""


# --------------------------------------------------------------------------- polling


def _children_of(parent: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
                if int(stat[stat.rindex(b")") + 2:].split()[1]) == parent:
                    out.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _tmpfs_used(path: str, size: int) -> int:
    """Bytes in use on the sandbox's tmpfs at ``path``; 0 until it is mounted there (before
    bubblewrap's setup the path is the host's, told apart by the size bubblewrap gives it)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    if st.f_blocks * st.f_frsize != size:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class PollGuard(MemoryGuard):
    """A supervisor thread that sums the execution's memory and kills it over the cap."""

    mode = "poll"

    def __init__(self, cap_bytes: int, tmpfs_bytes: int, interval: float = POLL_INTERVAL_S) -> None:
        self.cap = cap_bytes
        self.tmpfs_bytes = tmpfs_bytes
        self.interval = interval
        self.peak_bytes = None  # stays None when the namespace could not be observed at all
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._run, args=(pid,), name="sandbox-memory", daemon=True)
        self._thread.start()

    def _run(self, bwrap_pid: int) -> None:
        init = namespace = None
        while not self._stop.wait(self.interval if init else 0.002):
            if init is None:  # bubblewrap clones the namespace's init right after it starts
                for pid in _children_of(bwrap_pid):
                    try:
                        namespace = os.readlink(f"/proc/{pid}/ns/pid")
                    except OSError:
                        continue
                    if namespace != os.readlink("/proc/self/ns/pid"):
                        init = pid
                        break
                continue
            total = self._usage(init, namespace)
            if total is None:
                return  # the namespace is gone
            self.peak_bytes = max(self.peak_bytes or 0, total)
            if total > self.cap:
                self.exceeded = True
                _kill_if_child(init, bwrap_pid)
                return

    def _usage(self, init: int, namespace: str) -> int | None:
        root = f"/proc/{init}/root"
        if not os.path.exists(f"/proc/{init}"):
            return None
        total = _tmpfs_used(f"{root}/tmp", self.tmpfs_bytes) + _tmpfs_used(f"{root}/dev/shm", self.tmpfs_bytes)
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                    continue
                with open(f"/proc/{name}/statm", "rb") as f:
                    fields = f.read().split()
            except OSError:
                continue
            total += (int(fields[1]) - int(fields[2])) * _PAGE  # resident minus file-backed and shared
        return total

    def finish(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _kill_if_child(pid: int, parent: int) -> None:
    """SIGKILL ``pid`` (the namespace init: the kernel then kills the whole namespace), through a
    pidfd and only if it is still ``parent``'s child, so that a recycled pid is never hit."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        if int(stat[stat.rindex(b")") + 2:].split()[1]) == parent:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        os.close(pidfd)


def make_guard(config: SandboxConfig) -> MemoryGuard:
    """The guard ``config.memory_limit`` asks for; ``SandboxUnavailableError`` when it is
    ``cgroup`` and no cgroup can be made here."""
    cap = config.memory_mb << 20
    if config.memory_limit == "poll":
        return PollGuard(cap, config.tmpfs_mb << 20)
    where, why = cgroup_support()
    if where is not None:
        try:
            return CgroupGuard(cap, where)
        except OSError as exc:
            why = f"cannot create a memory cgroup under {where[1]} ({exc.strerror or exc})"
    if config.memory_limit == "cgroup":
        raise SandboxUnavailableError(
            f"SandboxConfig(memory_limit='cgroup') needs a memory cgroup per execution, but {why}: run as "
            f"root, or delegate a cgroup v2 subtree with the memory controller to this user, or choose "
            f"memory_limit='poll' (a best-effort supervisor) or 'auto'"
        )
    return PollGuard(cap, config.tmpfs_mb << 20)
