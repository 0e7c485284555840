"""Configuration of the Python sandbox and the error raised when it cannot run.

The default mode, ``"bwrap"``, runs every execution inside bubblewrap namespaces (no
network, no view of the host's files or environment variables) with resource limits.
``"unsafe-local"`` runs the code as a plain child process of the caller: it keeps the
limits that rlimits give (CPU time, memory, file size, wall clock) but isolates nothing
(the code can read your files, your home directory and the network). It exists for
trusted code on machines without user namespaces, and is only ever used when named.
"""

from __future__ import annotations

import errno
import resource
from dataclasses import dataclass
from typing import Literal

from wiki_sim.common.errors import UserOSError

SandboxMode = Literal["bwrap", "unsafe-local"]
MemoryLimitMode = Literal["auto", "cgroup", "poll"]


class SandboxUnavailableError(UserOSError):
    """The sandbox cannot run here (bubblewrap missing, no user namespaces, no interpreter).

    The message says what to install or enable.
    """


def out_of_descriptors(exc: OSError) -> bool:
    return exc.errno in (errno.EMFILE, errno.ENFILE)


def descriptor_advice(what: str, exc: OSError) -> str:
    """What to say when the sandbox cannot start for lack of file descriptors (not namespaces)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return (f"{what}: {exc.strerror} (this process may open {soft} files, at most {hard}): raise the "
            f"limit (`ulimit -n`) or close descriptors; user namespaces are not the problem")


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and isolation settings for one sandboxed Python execution."""

    mode: SandboxMode = "bwrap"
    """'bwrap': isolated in bubblewrap namespaces (the default, the only safe choice for
    model-written code). 'unsafe-local': no isolation at all, trusted code only."""
    cpu_seconds: float = 10.0
    """CPU time limit per process (RLIMIT_CPU); the process gets SIGXCPU, then SIGKILL 1 s later."""
    wall_seconds: float = 20.0
    """Wall-clock limit for the whole execution; at the deadline every process of the sandbox is killed."""
    memory_mb: int = 1024
    """Memory of the whole execution, in MiB: all its processes together plus the files in its
    /tmp and /dev/shm (see memory_limit); also each process's address-space limit (RLIMIT_AS)."""
    memory_limit: MemoryLimitMode = "auto"
    """How the whole-execution cap is enforced ('bwrap' mode): 'cgroup' (a memory cgroup per
    execution, enforced by the kernel; needs root or a delegated cgroup v2 subtree), 'poll' (a
    supervisor thread sums the execution's memory every 10 ms and kills it over the cap; best
    effort), or 'auto' (cgroup when one can be made here, else poll). See envs.sandbox.memory."""
    max_processes: int = 32
    """Processes plus threads the sandbox may run at once (RLIMIT_NPROC counted inside its own user namespace)."""
    output_cap_bytes: int = 10_000
    """Bytes of stdout, and separately of stderr, shown to the caller; beyond it the middle is
    cut and replaced by a note (the head and the tail are kept)."""
    file_size_mb: int = 64
    """Largest file the code may write (RLIMIT_FSIZE), in MiB."""
    tmpfs_mb: int = 256
    """Size of the private writable work directory /tmp (and of /dev/shm), in MiB; discarded afterwards."""
    python: str = "/usr/bin/python3"
    """Interpreter run inside the sandbox (absolute path). Only its own paths (its sys.path, the
    directories of its shared libraries, its executable and loader) and ro_paths are visible
    there; a virtual environment's base installation may need listing in ro_paths."""
    ro_paths: tuple[str, ...] = ()
    """Extra host directories bound read-only at the same path (absolute; for an interpreter or
    packages outside /usr). When the caller is root they must be readable by an unprivileged uid."""
    bwrap: str = "bwrap"
    """The bubblewrap executable (a name looked up on PATH, or an absolute path)."""
    uid_base: int = 1_500_000_000
    """When the caller is root, each execution runs as host uid uid_base + slot (never as root,
    for which the kernel does not enforce process limits); slots are locked across processes."""
    uid_count: int = 4096
    """Number of such uids, hence the most concurrent executions on one host when running as root."""

    def __post_init__(self) -> None:
        if self.memory_limit not in ("auto", "cgroup", "poll"):
            raise ValueError(f"SandboxConfig.memory_limit: expected 'auto', 'cgroup' or 'poll', got {self.memory_limit!r}")
        if self.mode not in ("bwrap", "unsafe-local"):
            raise ValueError(f"SandboxConfig.mode: expected 'bwrap' or 'unsafe-local', got {self.mode!r}")
        for name in ("cpu_seconds", "wall_seconds"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 86400:
                raise ValueError(f"SandboxConfig.{name}: expected seconds in (0, 86400], got {value!r}")
        for name, low in (("memory_mb", 32), ("max_processes", 2), ("output_cap_bytes", 64),
                          ("file_size_mb", 1), ("tmpfs_mb", 1), ("uid_count", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"SandboxConfig.{name}: expected an integer >= {low}, got {value!r}")
        if not isinstance(self.uid_base, int) or not 1000 <= self.uid_base <= 2**32 - 2 - self.uid_count:
            raise ValueError(
                f"SandboxConfig.uid_base: expected an integer in [1000, {2**32 - 2 - self.uid_count}], "
                f"got {self.uid_base!r}"
            )
        if not isinstance(self.python, str) or not self.python.startswith("/"):
            raise ValueError(f"SandboxConfig.python: expected an absolute path, got {self.python!r}")
        if isinstance(self.ro_paths, list):
            object.__setattr__(self, "ro_paths", tuple(self.ro_paths))
        if isinstance(self.ro_paths, str) or not all(
            isinstance(p, str) and p.startswith("/") and p != "/" for p in self.ro_paths
        ):
            raise ValueError(
                f"SandboxConfig.ro_paths: expected a tuple of absolute paths other than '/', got {self.ro_paths!r}"
            )
        if not isinstance(self.bwrap, str) or not self.bwrap:
            raise ValueError(f"SandboxConfig.bwrap: expected an executable name or path, got {self.bwrap!r}")
