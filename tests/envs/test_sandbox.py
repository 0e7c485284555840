"""Sandbox internals: config validation, output capture, status decoding, the bubblewrap
command line, uid slots, and the messages given when the sandbox cannot run."""

from __future__ import annotations

import multiprocessing
import os
import stat
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envs.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError
from envs.sandbox.bwrap import build_argv, explain_setup_failure, limit_args
from envs.sandbox.capture import HeadTailBuffer
from envs.sandbox.process import StatusPipe, decode_status
from envs.sandbox.runner import MAX_CODE_BYTES
from envs.sandbox.uids import hold_uid
from tests.envs.sandbox_support import FAST, require_sandbox

REPO = Path(__file__).resolve().parents[2]


def test_config_defaults_are_the_isolated_mode():
    config = SandboxConfig()
    assert config.mode == "bwrap"
    assert config.python == "/usr/bin/python3"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mode": "local"}, "SandboxConfig.mode: expected 'bwrap' or 'unsafe-local', got 'local'"),
        ({"cpu_seconds": 0}, "SandboxConfig.cpu_seconds: expected seconds in (0, 86400], got 0"),
        ({"wall_seconds": -1.0}, "SandboxConfig.wall_seconds: expected seconds in (0, 86400], got -1.0"),
        ({"memory_mb": 8}, "SandboxConfig.memory_mb: expected an integer >= 32, got 8"),
        ({"max_processes": 1}, "SandboxConfig.max_processes: expected an integer >= 2, got 1"),
        ({"output_cap_bytes": 10.5}, "SandboxConfig.output_cap_bytes: expected an integer >= 64, got 10.5"),
        ({"python": "python3"}, "SandboxConfig.python: expected an absolute path, got 'python3'"),
        ({"ro_paths": ("relative",)}, "SandboxConfig.ro_paths: expected a tuple of absolute paths"),
        ({"ro_paths": "/opt"}, "SandboxConfig.ro_paths: expected a tuple of absolute paths"),
        ({"uid_base": 0}, "SandboxConfig.uid_base: expected an integer in [1000,"),
    ],
)
def test_config_validation_says_expected_and_actual(changes, message):
    with pytest.raises(ValueError) as info:
        SandboxConfig(**changes)
    assert str(info.value).startswith(message)


def test_config_accepts_a_list_of_ro_paths():
    assert SandboxConfig(ro_paths=["/opt/a"]).ro_paths == ("/opt/a",)


def test_head_tail_buffer_keeps_everything_under_the_cap():
    buf = HeadTailBuffer(10)
    buf.write(b"abc")
    buf.write(b"defg")
    assert not buf.truncated and buf.text() == "abcdefg" and buf.total == 7


def test_head_tail_buffer_cuts_the_middle_with_a_note():
    buf = HeadTailBuffer(10)
    for piece in (b"0123", b"456789", b"abcdefghij", b"XYZ"):
        buf.write(piece)
    assert buf.truncated and buf.total == 23
    assert buf.text() == (
        "01234\n... [output truncated: 13 of 23 bytes omitted; "
        "only the first 5 and the last 5 bytes are shown] ...\nijXYZ"
    )


@given(st.lists(st.binary(max_size=40), max_size=20), st.integers(min_value=1, max_value=64))
def test_head_tail_buffer_matches_slicing(chunks, cap):
    buf = HeadTailBuffer(cap)
    for chunk in chunks:
        buf.write(chunk)
    data = b"".join(chunks)
    assert buf.total == len(data)
    assert bytes(buf.head) == data[: cap // 2]
    if buf.truncated:
        assert bytes(buf.tail) == data[len(data) - (cap - cap // 2):]
    else:
        assert bytes(buf.head) + bytes(buf.tail) == data


@pytest.mark.parametrize(("code", "expected"), [(0, (0, None)), (1, (1, None)), (-9, (-9, 9)),
                                                 (137, (137, 9)), (152, (152, 24)), (255, (255, None))])
def test_decode_status(code, expected):
    assert decode_status(code) == expected


def test_status_pipe_merges_objects_and_waits_for_partial_ones():
    r, w = os.pipe()
    try:
        pipe = StatusPipe(r)
        os.write(w, b'{ "child-pid": 42, "pid-namespace": 7 }\n{ "exit-')
        assert pipe.read() == {"child-pid": 42, "pid-namespace": 7}
        os.write(w, b'code": 3 }\n')
        assert pipe.read() == {"child-pid": 42, "pid-namespace": 7, "exit-code": 3}
    finally:
        os.close(r)
        os.close(w)


def test_bwrap_command_isolates_and_binds_only_system_paths():
    argv = build_argv(FAST, "/usr/bin/bwrap", "/usr/bin/prlimit", {"code": 3, "passwd": 4, "group": 5, "status": 6})
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--disable-userns", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert "--bind" not in argv and "--dev-bind" not in argv  # nothing of the host is writable
    binds = [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "--ro-bind"]
    targets = {inside for _, inside in binds}
    assert "/usr" not in targets and "/usr/bin" not in targets and "/usr/local" not in targets
    assert {"/usr/bin/python3", "/usr/bin/prlimit", "/usr/lib/python3.11"} <= targets  # the interpreter's own
    allowed = ("/etc/ld.so.cache", "/etc/localtime", "/usr/bin/python3", "/usr/bin/prlimit", "/usr/lib/", "/usr/lib64/",
               "/usr/local/lib/python3", "/lib/", "/lib64/")
    assert all(inside.startswith(allowed) for inside in targets), targets
    joined = " ".join(argv)
    assert "/root" not in joined and str(REPO) not in joined and "shadow" not in joined
    tmpfs = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]
    assert tmpfs == ["/tmp", "/dev/shm"]
    assert all(argv[i - 2] == "--size" for i, a in enumerate(argv) if a == "--tmpfs")  # size-capped
    assert argv[-4:] == [FAST.python, "-I", "-u", "/sandbox/main.py"]


def test_limit_args_carry_every_limit():
    config = replace(FAST, cpu_seconds=2.5, memory_mb=300, file_size_mb=5, max_processes=9)
    assert limit_args(config, "/usr/bin/prlimit") == [
        "/usr/bin/prlimit", "--cpu=3:4", f"--as={300 << 20}:{300 << 20}", f"--fsize={5 << 20}:{5 << 20}", "--core=0",
        "--nofile=1024:1024", "--nproc=9", "--",
    ]
    assert "--nproc=9" not in limit_args(config, "/usr/bin/prlimit", with_nproc=False)


def test_uid_slots_are_exclusive_within_a_process():
    base = 1_600_000_000 + os.getpid() % 100_000 * 4
    with hold_uid(base, 2) as first, hold_uid(base, 2) as second:
        assert {first, second} == {base, base + 1}
        with pytest.raises(SandboxUnavailableError, match="all 2 sandbox uids from"):
            with hold_uid(base, 2):
                pass
    with hold_uid(base, 1) as again:  # released on exit
        assert again == base


def _hold_in_child(base: int, ready, release) -> None:
    with hold_uid(base, 1):
        ready.set()
        release.wait(10)


def test_uid_slots_are_exclusive_across_processes():
    base = 1_600_500_000 + os.getpid() % 100_000
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_in_child, args=(base, ready, release))
    child.start()
    try:
        assert ready.wait(10)
        with pytest.raises(SandboxUnavailableError):
            with hold_uid(base, 1):
                pass
    finally:
        release.set()
        child.join(10)


def test_missing_bubblewrap_says_how_to_install_it():
    sandbox = Sandbox(SandboxConfig(bwrap="/nonexistent/bwrap"))
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        sandbox.check()
    with pytest.raises(SandboxUnavailableError, match="mode='unsafe-local'"):
        sandbox.run("print(1)")


@pytest.fixture
def world_dir():
    """A temporary directory every uid can traverse (the sandbox starts as an unprivileged uid)."""
    path = Path(tempfile.mkdtemp(prefix="websailor-sandbox-test-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    for p in path.iterdir():
        p.unlink()
    path.rmdir()


def _fake_bwrap(tmp_path: Path, version: str, stderr: str) -> str:
    # Stands in for a bubblewrap that the kernel refuses namespaces to (the message is bwrap's own).
    script = tmp_path / "bwrap"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "bubblewrap {version}"; exit 0; fi\n'
        f"echo '{stderr}' >&2\nexit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(script)


def test_no_user_namespaces_says_what_to_enable(world_dir):
    bwrap = _fake_bwrap(world_dir, "0.8.0", "bwrap: No permissions to create new namespace, likely because "
                        "the kernel does not allow non-privileged user namespaces.")
    with pytest.raises(SandboxUnavailableError) as info:
        Sandbox(SandboxConfig(bwrap=bwrap)).check()
    assert "enable unprivileged user namespaces" in str(info.value)
    assert "No permissions to create new namespace" in str(info.value)


def test_old_bubblewrap_is_refused(tmp_path):
    bwrap = _fake_bwrap(tmp_path, "0.4.1", "unused")
    with pytest.raises(SandboxUnavailableError, match="bubblewrap 0.8.0 or newer is needed"):
        Sandbox(SandboxConfig(bwrap=bwrap)).check()


def test_setup_failure_messages():
    config = SandboxConfig()
    assert "ro_paths" in explain_setup_failure(
        "prlimit: failed to execute /opt/py/bin/python3: No such file or directory", config)
    assert "must exist" in explain_setup_failure(
        "bwrap: Can't find source path /root/.pyenv: Permission denied", config)
    assert "enable unprivileged user namespaces" in explain_setup_failure(
        "bwrap: setting up uid map: Permission denied", config)
    assert explain_setup_failure("bwrap: something odd", config) == (
        "the sandbox failed to start (bwrap said: bwrap: something odd)")


def test_interpreter_outside_the_sandbox_is_reported():
    require_sandbox(FAST)
    sandbox = Sandbox(replace(FAST, python="/opt/not-installed/bin/python3"))
    with pytest.raises(SandboxUnavailableError, match="must be a working Python 3"):
        sandbox.check()


def test_missing_ro_path_is_reported():
    require_sandbox(FAST)
    with pytest.raises(SandboxUnavailableError, match="ro_paths must exist"):
        Sandbox(replace(FAST, ro_paths=("/nonexistent/websailor-dir",))).check()


def test_ro_paths_are_visible_and_read_only(world_dir):
    require_sandbox(FAST)
    (world_dir / "data.txt").write_text("shared data")
    (world_dir / "data.txt").chmod(0o644)
    sandbox = Sandbox(replace(FAST, ro_paths=(str(world_dir),)))
    code = f"""
print(open({str(world_dir / 'data.txt')!r}).read())
try:
    open({str(world_dir / 'new.txt')!r}, "w")
except OSError as e:
    print(type(e).__name__)
"""
    result = sandbox.run(code)
    assert result.ok, result.format()
    assert result.stdout.split() == ["shared", "data", "OSError"]
    assert sorted(p.name for p in world_dir.iterdir()) == ["data.txt"]


def test_code_is_validated_before_running():
    sandbox = Sandbox(SandboxConfig(bwrap="/nonexistent/bwrap"))
    with pytest.raises(ValueError, match="code: expected a string, got bytes"):
        sandbox.run(b"print(1)")
    with pytest.raises(ValueError, match=f"code: expected at most {MAX_CODE_BYTES} bytes"):
        sandbox.run("#" * (MAX_CODE_BYTES + 1))
