"""The outcome of one execution and its rendering as one readable block for the model."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field
from typing import Any

from envs.sandbox.config import SandboxConfig


@dataclass
class ExecutionResult:
    """What one sandboxed execution did."""

    stdout: str
    """Standard output (head and tail kept when over the cap, with a note in between)."""
    stderr: str
    """Standard error, likewise."""
    exit_code: int | None
    """The interpreter's exit status; None when it was killed by a signal or at the deadline."""
    signal: int | None = None
    """The signal that ended the interpreter, if one did."""
    timed_out: bool = False
    """True when the wall-clock limit was reached and the sandbox was killed."""
    stdout_bytes: int = 0
    """Bytes written to stdout in all (also those cut)."""
    stderr_bytes: int = 0
    """Bytes written to stderr in all."""
    truncated: bool = False
    """True when stdout or stderr was over the cap."""
    duration_s: float = 0.0
    """Wall-clock seconds from start to the end of the execution."""
    notes: list[str] = field(default_factory=list)
    """Clear messages about limits that were reached, already phrased for the model."""
    memory_exceeded: bool = False
    """True when the execution went over its whole-execution memory cap and was (partly) killed."""
    peak_memory_bytes: int | None = None
    """Most memory the execution held at once (its cgroup's peak, or the supervisor's highest
    sample), when known."""
    memory_limit: str = ""
    """How the memory cap was enforced: 'cgroup', 'poll', or '' (unsafe-local: per process only)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def status(self) -> str:
        """'ok', 'error' (non-zero exit), 'killed' (a signal) or 'timeout'."""
        if self.timed_out:
            return "timeout"
        if self.signal is not None:
            return "killed"
        return "ok" if self.exit_code == 0 else "error"

    def metadata(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "signal": signal_name(self.signal) if self.signal is not None else None,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "stdout_bytes": self.stdout_bytes,
            "stderr_bytes": self.stderr_bytes,
            "duration_s": round(self.duration_s, 4),
            "memory_exceeded": self.memory_exceeded,
            "peak_memory_bytes": self.peak_memory_bytes,
            "memory_limit": self.memory_limit,
        }

    def format(self) -> str:
        """stdout, stderr, the exit status and any limit notes, as one block."""
        parts: list[str] = []
        if self.stdout:
            parts.append("stdout:\n" + self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("stderr:\n" + self.stderr.rstrip("\n"))
        if not parts and self.ok:
            parts.append("Finished execution with no output (use print() to see values).")
        if self.timed_out:
            parts.append("[exit status: killed at the wall-clock limit]")
        elif self.signal is not None:
            parts.append(f"[exit status: killed by {signal_name(self.signal)}]")
        else:
            parts.append(f"[exit status: {self.exit_code}]")
        parts.extend(self.notes)
        return "\n".join(parts)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def limit_notes(result: ExecutionResult, config: SandboxConfig) -> list[str]:
    """Messages naming the limit that most likely ended or hampered the program.

    Python reports most limits as ordinary errors (MemoryError, EFBIG, EAGAIN), so the
    signs are looked for in stderr's tail; the notes say what the limit is, not more.
    """
    notes: list[str] = []
    if result.timed_out:
        notes.append(
            f"[timeout] The program exceeded the wall-clock limit of {config.wall_seconds:g} s "
            f"and was killed; any output above is what it printed before."
        )
    cpu = math.ceil(config.cpu_seconds)
    if result.signal == signal.SIGXCPU:
        notes.append(f"[limit] CPU time is limited to {cpu} s per process; the program was killed.")
    elif result.signal == signal.SIGKILL and not result.timed_out and not result.memory_exceeded:
        notes.append(
            f"[signal] SIGKILL comes from the program itself or, when it ignores SIGXCPU, from the "
            f"CPU time limit ({cpu} s per process, then 1 s more)."
        )
    tail = result.stderr[-4000:]
    if result.memory_exceeded:
        notes.append(
            f"[limit] Memory is limited to {config.memory_mb} MiB for the whole execution (all its processes "
            f"and the files in /tmp and /dev/shm together); it went over, and was killed."
        )
    elif "MemoryError" in tail or "Cannot allocate memory" in tail or "Unable to allocate" in tail:
        notes.append(f"[limit] Memory is limited to {config.memory_mb} MiB (all processes together).")
    if "File too large" in tail or result.signal == signal.SIGXFSZ:
        notes.append(f"[limit] Files are limited to {config.file_size_mb} MiB each.")
    if "No space left on device" in tail:
        notes.append(f"[limit] The work directory /tmp holds at most {config.tmpfs_mb} MiB.")
    if "Resource temporarily unavailable" in tail or "can't start new thread" in tail:
        notes.append(f"[limit] At most {config.max_processes} processes and threads may run at once.")
    if result.truncated:
        notes.append(
            f"[limit] Output is capped at {config.output_cap_bytes} bytes per stream "
            f"(stdout {result.stdout_bytes} bytes, stderr {result.stderr_bytes} bytes were written)."
        )
    return notes
