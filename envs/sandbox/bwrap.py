"""The bubblewrap command line for one execution, and what to say when bubblewrap fails.

What the sandboxed code sees:

- new user (unprivileged uid 1000 inside, no capabilities, no further user namespaces),
  PID, IPC, UTS and network namespaces: no network interface but its own loopback;
- read-only, only the interpreter's own paths (its standard library and ``dist-packages``,
  the directories of its shared libraries, its executable and loader, and ``prlimit``; see
  :mod:`envs.sandbox.paths`), plus ``ro_paths``: not the rest of ``/usr``;
- a synthetic ``/etc`` holding only ``passwd``, ``group``, ``ld.so.cache`` and ``localtime``;
- fresh ``/proc`` (its own processes only) and a minimal ``/dev``;
- ``/tmp`` (the working and home directory) and ``/dev/shm``: private size-capped tmpfs,
  gone when the execution ends; everything else is read-only;
- the code itself at ``/sandbox/main.py`` (read-only);
- a fixed, minimal environment (nothing of the caller's variables).

Resource limits are set by ``prlimit`` inside the sandbox, after the user namespace exists,
so that RLIMIT_NPROC counts the sandbox's own processes only (kernels >= 5.14 count it per
user namespace).
"""

from __future__ import annotations

import functools
import math
import os
import re
import resource
import shutil
import subprocess
from pathlib import Path

from envs.sandbox.config import SandboxConfig, SandboxUnavailableError, descriptor_advice, out_of_descriptors
from envs.sandbox.paths import interpreter_binds

MIN_BWRAP_VERSION = (0, 8, 0)  # --disable-userns (0.8.0) and --size (0.7.0)
SANDBOX_UID = 1000
CODE_PATH = "/sandbox/main.py"
WORK_DIR = "/tmp"

SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORK_DIR,
    "TMPDIR": WORK_DIR,
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    # Threads count against the process limit; one BLAS thread per process keeps numpy usable.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

PASSWD = (
    "root:x:0:0:root:/:/usr/sbin/nologin\n"
    f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{WORK_DIR}:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n"

INSTALL_HINT = (
    "install it with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap` "
    "(Fedora), or, for trusted code only, choose SandboxConfig(mode='unsafe-local'), which runs "
    "code WITHOUT any isolation"
)
NAMESPACE_HINT = (
    "enable unprivileged user namespaces (`sysctl -w kernel.unprivileged_userns_clone=1` on "
    "Debian, `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` on Ubuntu 24.04+, "
    "`sysctl -w user.max_user_namespaces=15000`); inside Docker, run the container with "
    "`--security-opt seccomp=unconfined --security-opt apparmor=unconfined`"
)


def locate_bwrap(config: SandboxConfig) -> str:
    """The bubblewrap executable's path; raises with install instructions if it is missing or too old."""
    path = shutil.which(config.bwrap)
    if path is None:
        raise SandboxUnavailableError(
            f"the python tool's sandbox needs bubblewrap, but {config.bwrap!r} was not found: {INSTALL_HINT}"
        )
    version = bwrap_version(path)
    if version < MIN_BWRAP_VERSION:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_BWRAP_VERSION))
        raise SandboxUnavailableError(
            f"bubblewrap {need} or newer is needed, {path} is {have}: install a newer bubblewrap "
            f"(Debian 12+, Ubuntu 24.04+, or build it from https://github.com/containers/bubblewrap)"
        )
    return path


@functools.lru_cache(maxsize=8)
def bwrap_version(path: str) -> tuple[int, ...]:
    """``bwrap --version`` as a tuple of ints; (0,) when it cannot be read."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, env={}).stdout
    except OSError as exc:
        if out_of_descriptors(exc):  # not an old bubblewrap: say what is wrong
            raise SandboxUnavailableError(descriptor_advice(f"could not run {path}", exc)) from exc
        return (0,)
    except subprocess.SubprocessError:
        return (0,)
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g or 0) for g in match.groups()) if match else (0,)


def locate_prlimit() -> str:
    """``prlimit`` (util-linux), which must also be visible inside the sandbox (under /usr)."""
    for candidate in ("/usr/bin/prlimit", "/usr/sbin/prlimit"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise SandboxUnavailableError(
        "the sandbox sets resource limits with prlimit, which was not found under /usr/bin: "
        "install util-linux (`apt-get install util-linux`)"
    )


@functools.lru_cache(maxsize=1)
def _root_links() -> tuple[str, ...]:
    """Arguments recreating the links /bin, /sbin, /lib* of a merged-/usr host (hosts where they
    are directories get only what the interpreter needs from them, like everything else)."""
    args: list[str] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
    return tuple(args)


def interpreter_args(config: SandboxConfig, prlimit: str) -> list[str]:
    """``--ro-bind`` arguments for the interpreter's own paths (:mod:`envs.sandbox.paths`)."""
    args: list[str] = []
    for host, inside in interpreter_binds(config.python, prlimit):
        args += ["--ro-bind", host, inside]
    return args


def _etc_args(data_fds: dict[str, int]) -> list[str]:
    args = ["--perms", "0444", "--ro-bind-data", str(data_fds["passwd"]), "/etc/passwd",
            "--perms", "0444", "--ro-bind-data", str(data_fds["group"]), "/etc/group"]
    if os.path.isfile("/etc/ld.so.cache"):
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    if os.path.isfile("/etc/localtime"):  # the zone file itself (its /usr/share/zoneinfo is not there)
        args += ["--ro-bind", "/etc/localtime", "/etc/localtime"]
    return args


SANDBOX_NOFILE = 1024
"""Open files per sandboxed process (or fewer, when the caller's own hard limit is lower)."""


def _capped(resource_id: int, soft: int, hard: int | None = None) -> str:
    """``soft:hard`` for prlimit, lowered to the caller's hard limit: the sandbox (unprivileged
    in its user namespace) can only lower a limit, and prlimit fails on a request above it."""
    hard = soft if hard is None else hard
    ceiling = resource.getrlimit(resource_id)[1]
    if ceiling != resource.RLIM_INFINITY:
        soft, hard = min(soft, ceiling), min(hard, ceiling)
    return f"{soft}:{hard}"


def limit_args(config: SandboxConfig, prlimit: str, with_nproc: bool = True) -> list[str]:
    """``prlimit`` arguments putting the config's limits on the command that follows them."""
    cpu = math.ceil(config.cpu_seconds)
    args = [
        prlimit,
        f"--cpu={_capped(resource.RLIMIT_CPU, cpu, cpu + 1)}",  # SIGXCPU at the soft limit, SIGKILL a second later
        f"--as={_capped(resource.RLIMIT_AS, config.memory_mb << 20)}",
        f"--fsize={_capped(resource.RLIMIT_FSIZE, config.file_size_mb << 20)}",
        "--core=0",
        f"--nofile={_capped(resource.RLIMIT_NOFILE, SANDBOX_NOFILE)}",
    ]
    if with_nproc:
        args.append(f"--nproc={config.max_processes}")
    return args + ["--"]


def build_argv(config: SandboxConfig, bwrap: str, prlimit: str, fds: dict[str, int]) -> list[str]:
    """The full command: bubblewrap, then prlimit, then the interpreter on ``/sandbox/main.py``.

    ``fds`` maps ``code``, ``passwd``, ``group`` to readable descriptors and ``status`` to a
    writable one (bubblewrap reports the child's pid there once the sandbox is set up).
    """
    env_args: list[str] = []
    for key, value in SANDBOX_ENV.items():
        env_args += ["--setenv", key, value]
    ro_args: list[str] = []
    for path in config.ro_paths:
        ro_args += ["--ro-bind", path, path]
    tmpfs_bytes = str(config.tmpfs_mb << 20)
    return [
        bwrap,
        "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
        "--unshare-cgroup-try", "--disable-userns",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
        "--cap-drop", "ALL", "--die-with-parent", "--new-session",
        "--clearenv", *env_args,
        *_root_links(), *interpreter_args(config, prlimit),
        *_etc_args(fds),
        "--proc", "/proc", "--dev", "/dev",
        "--size", tmpfs_bytes, "--tmpfs", WORK_DIR,
        "--size", tmpfs_bytes, "--tmpfs", "/dev/shm",
        "--perms", "0444", "--ro-bind-data", str(fds["code"]), CODE_PATH,
        *ro_args,
        # Writable places are the two size-capped tmpfs only; the root and /dev tmpfs that
        # bubblewrap creates have no size limit, so they become read-only.
        "--remount-ro", "/dev", "--remount-ro", "/",
        "--chdir", WORK_DIR,
        "--json-status-fd", str(fds["status"]),
        "--",
        *limit_args(config, prlimit),
        config.python, "-I", "-u", CODE_PATH,
    ]


def explain_setup_failure(stderr: str, config: SandboxConfig) -> str:
    """A message for a sandbox that failed before the code started, from bubblewrap's stderr."""
    said = " ".join(stderr.strip().split())[-500:] or "(nothing on stderr)"
    lowered = said.lower()
    if "can't find source path" in lowered:
        return (
            f"a path to bind into the sandbox is missing or unreadable (bwrap said: {said}): every entry of "
            f"SandboxConfig.ro_paths must exist and, when the caller is root, be readable by an "
            f"unprivileged uid (the sandbox starts as one), so nothing under a private home directory"
        )
    if "failed to set the" in lowered and "resource limit" in lowered:
        return (
            f"a resource limit could not be set inside the sandbox (bwrap said: {said}): the sandbox can only "
            f"lower limits, and this one is above this process's hard limit; lower it in SandboxConfig or "
            f"raise the hard limit (`ulimit -H`, or `prlimit --pid {os.getpid()}`)"
        )
    if "too many open files" in lowered:
        return (
            f"the sandbox ran out of file descriptors (bwrap said: {said}): this process's open-files limit is "
            f"{resource.getrlimit(resource.RLIMIT_NOFILE)}; raise it (`ulimit -n`) or close descriptors"
        )
    if any(s in lowered for s in ("namespace", "uid map", "setting up uid", "operation not permitted",
                                  "permission denied", "no permissions")):
        return f"bubblewrap cannot create its namespaces here (bwrap said: {said}): {NAMESPACE_HINT}"
    if "execvp" in lowered or "no such file" in lowered:
        return (
            f"the sandbox could not start {config.python} (bwrap said: {said}): inside the sandbox only "
            f"the interpreter's own paths (its sys.path and shared libraries) and SandboxConfig.ro_paths "
            f"are visible; use a system interpreter (`apt-get install python3`) or add its installation "
            f"directory to ro_paths"
        )
    return f"the sandbox failed to start (bwrap said: {said})"
