"""The sandbox's whole-execution memory cap, descriptor hygiene, visible paths and advice."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from envs.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError
from envs.sandbox.bwrap import explain_setup_failure
from envs.sandbox.memory import cgroup_support
from envs.tools.python import PythonTool
from tests.envs.sandbox_support import FAST, assert_host_responsive, require_sandbox

# Four children of 100 MiB each: every one is within the per-process limit (RLIMIT_AS), the sum is not.
ALLOCATORS = """
import os, time
children = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        hog = bytearray(100 << 20)
        time.sleep(2)
        os._exit(0)
    children.append(pid)
codes = [os.waitpid(pid, 0)[1] for pid in children]
print("exits", codes, flush=True)
"""

FILES_AND_HEAP = """
for path in ("/tmp/a", "/dev/shm/b"):
    with open(path, "wb") as f:
        for _ in range(40):
            f.write(b"x" * (1 << 20))
hog = bytearray(190 << 20)
import time; time.sleep(2)
print("alive")
"""

MODES = ["poll", pytest.param("cgroup", marks=pytest.mark.skipif(
    cgroup_support()[0] is None, reason=f"no memory cgroups here: {cgroup_support()[1]}"))]
CAPPED = replace(FAST, memory_mb=256, tmpfs_mb=48, file_size_mb=48, wall_seconds=8)


@pytest.mark.parametrize("mode", MODES)
def test_memory_is_capped_for_the_whole_execution(mode):
    sandbox = require_sandbox(replace(CAPPED, memory_limit=mode))
    result = sandbox.run(ALLOCATORS)
    assert result.memory_exceeded and result.memory_limit == mode, result.format()
    assert "for the whole execution" in result.format()
    if mode == "cgroup":  # the kernel enforces the cap: the peak never passes it
        assert result.peak_memory_bytes <= 256 << 20
        assert "exits" in result.stdout and "9" in result.stdout  # some children were OOM-killed
    else:  # sampled every 10 ms: it may pass the cap by what it allocates in one interval
        assert result.peak_memory_bytes < (256 + 128) << 20 and result.status == "killed"
    assert_host_responsive(sandbox)


@pytest.mark.parametrize("mode", MODES)
def test_files_in_tmp_and_dev_shm_count_against_the_cap(mode):
    sandbox = require_sandbox(replace(CAPPED, memory_limit=mode))
    result = sandbox.run(FILES_AND_HEAP)  # 40 + 40 MiB of files and 190 MiB of heap: under 256 apart, not together
    assert result.memory_exceeded and "alive" not in result.stdout, result.format()
    under = sandbox.run(FILES_AND_HEAP.replace("190 << 20", "40 << 20"))
    assert under.ok and "alive" in under.stdout and not under.memory_exceeded, under.format()


def test_memory_limit_cgroup_without_cgroups_says_what_to_do(monkeypatch):
    from envs.sandbox import memory

    monkeypatch.setattr(memory, "cgroup_support", lambda: (None, "no cgroup memory controller is mounted"))
    with pytest.raises(SandboxUnavailableError, match="memory_limit='poll'"):
        memory.make_guard(replace(FAST, memory_limit="cgroup"))
    assert memory.make_guard(replace(FAST, memory_limit="auto")).mode == "poll"


def test_bad_memory_limit_is_refused():
    with pytest.raises(ValueError, match="memory_limit"):
        SandboxConfig(memory_limit="rlimit")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_no_descriptor_leaks_over_many_calls_with_bad_code():
    require_sandbox(FAST)
    tool = PythonTool(FAST)
    bad = ['print("\ud800")', "\udcff = 1", "def (:", "import sys; sys.exit(3)", "raise SystemExit('\udc80')",
           "x" * ((1 << 20) + 1)]
    for code in bad:  # warm up (probes, caches)
        tool({"code": code})
    before = _open_fds()
    for _ in range(6):
        for code in bad:
            result = tool({"code": code})
            assert result.metadata["status"] in ("error", "bad_arguments"), result.text
    assert _open_fds() == before


def test_lone_surrogate_in_a_string_literal_runs():
    sandbox = require_sandbox(FAST)
    result = sandbox.run('print(repr("\ud800"), len("a\udc80b"))')
    assert result.ok and result.stdout.strip() == "'\\ud800' 3", result.format()


def test_only_the_interpreters_own_paths_are_visible():
    sandbox = require_sandbox(FAST)
    code = """
import os, sqlite3, ssl, ctypes, decimal, lzma, json
for path in ("/usr/local/etc", "/usr/share", "/usr/sbin", "/usr/include", "/bin/sh", "/usr/bin/env", "/usr/local/bin"):
    print(path, os.path.exists(path))
print(sorted(os.listdir("/usr/bin")))
"""
    result = sandbox.run(code)
    assert result.ok, result.format()
    lines = result.stdout.splitlines()
    assert all(line.endswith(" False") for line in lines[:-1]), result.stdout
    assert lines[-1] == "['prlimit', 'python3']"


def test_low_open_files_hard_limit_gets_the_right_advice():
    require_sandbox(FAST)
    code = ("from envs.tools.python import PythonTool; from tests.envs.sandbox_support import FAST; "
            "r = PythonTool(FAST)({'code': 'import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))'}); "
            "print(r.text)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for limit in (64, 9):
        out = subprocess.run(["prlimit", f"--nofile={limit}:{limit}", sys.executable, "-c", code],
                             capture_output=True, text=True, timeout=60, env=env).stdout
        assert "user namespaces" not in out or "not the problem" in out, out
        if limit == 64:  # lowered to the caller's hard limit: it runs
            assert f"({limit}, {limit})" in out, out
        else:
            assert "ulimit -n" in out, out
    said = "prlimit: failed to set the NOFILE resource limit: Operation not permitted"
    assert "hard limit" in explain_setup_failure(said, FAST) and "sysctl" not in explain_setup_failure(said, FAST)


def test_tongyi_python_call_runs_in_the_sandbox():
    require_sandbox(FAST)
    from envs.env import ResearchEnv

    env = ResearchEnv([PythonTool(FAST)], [{"question": "q", "answer": "a"}], current_date="2025-07-18")
    env.reset(options={"task_index": 0})
    obs, *_, info = env.step('<think>t</think>\n<tool_call>\n{"name": "PythonInterpreter", "arguments": {}}\n'
                             "<code>\nprint(6 * 7)\n</code>\n</tool_call>")
    assert "42" in obs and info["tool_ok"] and info["tool_name"] == "python", obs
    env.close()


def test_unsafe_local_has_no_whole_execution_cap_and_says_so():
    result = Sandbox(replace(FAST, mode="unsafe-local")).run("print(1)")
    assert result.ok and result.memory_limit == "" and result.metadata()["memory_exceeded"] is False
