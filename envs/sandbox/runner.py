"""Running one piece of Python code in the sandbox: :class:`Sandbox`.

    sandbox = Sandbox(SandboxConfig(wall_seconds=5))
    sandbox.check()                    # optional: raises SandboxUnavailableError with a fix
    result = sandbox.run("print(1)")   # ExecutionResult; result.format() for the model

Every execution is independent: a fresh sandbox, a fresh interpreter, an empty /tmp.
Executions may run concurrently from several threads.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from envs.sandbox.bwrap import (
    GROUP,
    PASSWD,
    SANDBOX_ENV,
    build_argv,
    explain_setup_failure,
    limit_args,
    locate_bwrap,
    locate_prlimit,
)
from envs.sandbox.config import SandboxConfig, SandboxUnavailableError, descriptor_advice, out_of_descriptors
from envs.sandbox.process import (
    Reaper,
    StatusPipe,
    collect,
    kill_group,
    kill_namespace,
    wait_namespace_gone,
)
from envs.sandbox.memory import MemoryGuard, make_guard
from envs.sandbox.result import ExecutionResult, limit_notes
from envs.sandbox.uids import hold_uid

MAX_CODE_BYTES = 1 << 20
_PROBE_CODE = "import sys; print('sandbox-ok', sys.version_info[0])"
_probed: set[tuple] = set()
_probe_lock = threading.Lock()


class Sandbox:
    """Runs Python code under :class:`SandboxConfig`'s isolation and limits."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()

    def check(self) -> None:
        """Raise :class:`SandboxUnavailableError` (saying what to install or enable) unless
        the sandbox works here; the first success is remembered for the process."""
        cfg = self.config
        if cfg.mode == "unsafe-local":
            if not os.access(cfg.python, os.X_OK):
                raise SandboxUnavailableError(f"SandboxConfig.python {cfg.python!r} is not an executable")
            locate_prlimit()
            return
        bwrap = locate_bwrap(cfg)
        prlimit = locate_prlimit()
        key = (bwrap, cfg.python, cfg.ro_paths, os.geteuid() == 0, cfg.uid_base)
        with _probe_lock:
            if key in _probed:
                return
            result = _run_bwrap(_PROBE_CODE, cfg, bwrap, prlimit)
            if result.stdout.strip() != "sandbox-ok 3":
                raise SandboxUnavailableError(explain_setup_failure(result.stderr or result.stdout, cfg))
            _probed.add(key)

    def run(self, code: str) -> ExecutionResult:
        """Execute ``code`` as the main module; raises SandboxUnavailableError or ValueError (bad code)."""
        if not isinstance(code, str):
            raise ValueError(f"code: expected a string, got {type(code).__name__}")
        size = len(code.encode("utf-8", errors="surrogatepass"))
        if size > MAX_CODE_BYTES:
            raise ValueError(f"code: expected at most {MAX_CODE_BYTES} bytes, got {size}")
        self.check()
        if self.config.mode == "unsafe-local":
            return _run_unsafe_local(code, self.config, locate_prlimit())
        return _run_bwrap(code, self.config, locate_bwrap(self.config), locate_prlimit())


_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_source(text: str) -> bytes:
    """UTF-8 source. A lone surrogate cannot be UTF-8; it most often comes from a JSON
    ``\\ud800`` escape that was meant for a Python string literal, so it is written back
    as that escape (outside a literal the interpreter reports it as any other error)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _memfd(name: str, data: bytes, fds: dict[str, int]) -> None:
    """A sealed-off in-memory file holding ``data``, recorded in ``fds`` as soon as it exists
    (so that the caller closes it whatever fails next)."""
    fds[name] = os.memfd_create(name)  # close-on-exec: only the bubblewrap child gets it, via pass_fds
    view = memoryview(data)
    while view:
        view = view[os.write(fds[name], view):]
    os.lseek(fds[name], 0, os.SEEK_SET)


def _run_bwrap(code: str, cfg: SandboxConfig, bwrap: str, prlimit: str) -> ExecutionResult:
    fds: dict[str, int] = {}
    status_r = -1
    guard: MemoryGuard | None = None
    try:
        source = encode_source(code)
        try:
            for name, data in (("code", source), ("passwd", PASSWD.encode()), ("group", GROUP.encode())):
                _memfd(name, data, fds)
            status_r, fds["status"] = os.pipe()
        except OSError as exc:
            if out_of_descriptors(exc):
                raise SandboxUnavailableError(descriptor_advice("the sandbox could not start", exc)) from exc
            raise
        guard = make_guard(cfg)
        as_root = os.geteuid() == 0
        with hold_uid(cfg.uid_base, cfg.uid_count) if as_root else contextlib.nullcontext() as uid:
            proc, start = _start_bwrap(build_argv(cfg, bwrap, prlimit, fds), fds, uid, cfg, bwrap, guard)
            for name in list(fds):  # the child has its copies; ours must go, for EOF on the pipes
                os.close(fds.pop(name))
            reaper, status = Reaper(proc), StatusPipe(status_r)
            try:
                result = collect(proc, start, cfg, reaper, lambda: kill_namespace(proc, reaper, status))
            except BaseException:  # interrupted: the sandbox must not run on unattended
                if not reaper.exited():
                    kill_namespace(proc, reaper, status)
                raise
            wait_namespace_gone(status)
        ran = "exit-code" in status.read()
    finally:
        for fd in [*fds.values(), status_r]:
            if fd >= 0:
                os.close(fd)
        if guard is not None:
            guard.finish()
    result.memory_exceeded, result.peak_memory_bytes, result.memory_limit = (
        guard.exceeded, guard.peak_bytes, guard.mode)
    result.notes = limit_notes(result, cfg)
    # Without an exit code the command never ran: bubblewrap itself failed (its stderr says why).
    if not ran and not result.timed_out and result.signal is None and not guard.exceeded:
        raise SandboxUnavailableError(explain_setup_failure(result.stderr, cfg))
    return result


def _start_bwrap(
    argv: list[str], fds: dict[str, int], uid: int | None, cfg: SandboxConfig, bwrap: str, guard: MemoryGuard
) -> tuple[subprocess.Popen, float]:
    as_user = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    paused = guard.mode == "cgroup"
    if paused:  # a shell waits for one line, then becomes bubblewrap: it is moved into the cgroup first
        argv = ["/bin/sh", "-c", 'read go && exec "$0" "$@"', *argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if paused else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={}, cwd="/", pass_fds=tuple(fds.values()), start_new_session=True, **as_user,
        )
    except OSError as exc:
        if out_of_descriptors(exc):
            raise SandboxUnavailableError(descriptor_advice(f"could not start {bwrap}", exc)) from exc
        raise SandboxUnavailableError(
            f"could not start {bwrap} as host uid {uid}: {exc}; as root, each execution starts "
            f"bubblewrap as an unprivileged uid from SandboxConfig.uid_base ({cfg.uid_base}), so "
            f"bubblewrap must be executable by that uid and the uid must be mapped in this host or "
            f"container (see /proc/self/uid_map)"
        ) from exc
    if paused:
        try:
            guard.attach(proc.pid)
            proc.stdin.write(b"go\n")
        except OSError as exc:
            kill_group(proc)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
            raise SandboxUnavailableError(f"could not move the sandbox into its memory cgroup: {exc}") from exc
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
    guard.watch(proc.pid)
    return proc, start


def _run_unsafe_local(code: str, cfg: SandboxConfig, prlimit: str) -> ExecutionResult:
    """No isolation: a child process in a temporary directory, with rlimits and the wall clock.

    Without namespaces there is no per-sandbox process count (RLIMIT_NPROC would count all of
    the caller's processes, and is not enforced for root), and a daemon that leaves the
    process group survives the deadline. Trusted code only.
    """
    with tempfile.TemporaryDirectory(prefix="websailor-unsafe-") as work:
        main = Path(work) / "main.py"
        main.write_bytes(encode_source(code))
        env = {**SANDBOX_ENV, "HOME": work, "TMPDIR": work}
        argv = [*limit_args(cfg, prlimit, with_nproc=False), cfg.python, "-I", "-u", str(main)]
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=work, start_new_session=True,
        )
        reaper = Reaper(proc)
        try:
            return collect(proc, start, cfg, reaper, lambda: kill_group(proc))
        except BaseException:
            kill_group(proc)
            reaper.wait_until(float("inf"))
            raise
