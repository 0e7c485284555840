"""Shared helpers for the sandbox tests: short limits, and skip-or-fail when bwrap is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envs.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError

# Short limits keep every abuse case to a few seconds.
FAST = SandboxConfig(
    cpu_seconds=2, wall_seconds=4, memory_mb=256, max_processes=16,
    output_cap_bytes=2000, file_size_mb=4, tmpfs_mb=16,
)


def require_sandbox(config: SandboxConfig = FAST) -> Sandbox:
    """A working sandbox; without bubblewrap: fail under CI (which installs it), skip elsewhere."""
    sandbox = Sandbox(config)
    try:
        sandbox.check()
    except SandboxUnavailableError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the real sandbox, but it is unavailable: {exc}")
        pytest.skip(f"bubblewrap sandbox unavailable on this machine: {exc}")
    return sandbox


def processes_named(marker: str) -> list[int]:
    """Host pids whose command name (/proc/PID/comm) is ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == marker:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def assert_host_responsive(sandbox: Sandbox) -> None:
    """The host still starts processes, and the sandbox still runs code."""
    assert subprocess.run(["true"], timeout=30).returncode == 0
    after = sandbox.run("print('still here')")
    assert after.ok and after.stdout.strip() == "still here", after.format()
