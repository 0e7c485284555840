"""Escape and abuse suite: each attempt runs in the real bubblewrap sandbox and must be contained.

Every case checks, from the host, that the attempt had no effect outside, and, where it
could, that the check itself would have seen an effect (so the test can fail).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from tests.envs.sandbox_support import FAST, assert_host_responsive, processes_named, require_sandbox

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sandbox():
    return require_sandbox(FAST)


def _json_lines(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


READ_ATTEMPTS = """
import json, os
out = {}
for path in PATHS:
    try:
        if os.path.isdir(path):
            out[path] = "LISTED " + ",".join(os.listdir(path))
        else:
            with open(path, "rb") as f:
                out[path] = "READ " + f.read(200).decode("latin-1")
    except OSError as e:
        out[path] = type(e).__name__
print(json.dumps(out))
"""


def test_cannot_read_host_files(sandbox):
    this_file = str(Path(__file__).resolve())
    paths = [this_file, str(REPO), str(REPO / "pyproject.toml"), "/etc/shadow", "/root", str(Path.home()),
             "/work", "/proc/1/root/etc/shadow", "/etc/hostname", "/home"]
    assert Path(this_file).is_file() and (REPO / "pyproject.toml").is_file()  # the host sees them
    result = sandbox.run(f"PATHS = {paths!r}\n" + READ_ATTEMPTS)
    assert result.ok, result.format()
    seen = _json_lines(result.stdout)
    for path in paths:
        assert seen[path] in ("FileNotFoundError", "PermissionError", "NotADirectoryError"), (path, seen[path])


def test_cannot_read_callers_environment(sandbox, monkeypatch):
    secret = f"sk-fake-{uuid.uuid4().hex}"
    monkeypatch.setenv("WEBSAILOR_FAKE_API_KEY", secret)
    assert os.environ["WEBSAILOR_FAKE_API_KEY"] == secret
    code = """
import os
print(dict(os.environ))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            print(pid, open(f"/proc/{pid}/environ", "rb").read())
        except OSError as e:
            print(pid, e)
"""
    result = sandbox.run(code)
    assert result.ok, result.format()
    assert "HOME" in result.stdout  # the environment was printed
    assert secret not in result.stdout and secret not in result.stderr
    assert "WEBSAILOR_FAKE_API_KEY" not in result.stdout


def test_cannot_write_outside_work_dir(sandbox, tmp_path):
    host_dir = tmp_path / "outside"
    host_dir.mkdir()
    targets = ["/pwned", "/usr/pwned", "/etc/pwned", "/sandbox/main.py", "/dev/pwned",
               str(host_dir / "pwned"), str(REPO / "pwned")]
    code = f"""
import json, os
out = {{}}
for path in {targets!r}:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("x")
        out[path] = "WROTE"
    except OSError as e:
        out[path] = type(e).__name__
with open("/tmp/inside", "w") as f:
    f.write("fine")
out["/tmp/inside"] = open("/tmp/inside").read()
print(json.dumps(out))
"""
    result = sandbox.run(code)
    assert result.ok, result.format()
    seen = _json_lines(result.stdout)
    assert seen["/tmp/inside"] == "fine"  # the private work dir is writable
    for path in targets:
        # The host's /tmp is not the sandbox's: writing "there" lands in the private tmpfs.
        if not path.startswith("/tmp/"):
            assert seen[path] != "WROTE", path
    assert seen[str(host_dir / "pwned")] == "WROTE"
    assert list(host_dir.iterdir()) == []
    assert not (REPO / "pwned").exists()


def test_no_network_not_even_host_loopback(sandbox):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    probe = socket.create_connection(("127.0.0.1", port), timeout=2)  # the server does accept
    server.accept()[0].close()
    probe.close()
    code = f"""
import socket
print("interfaces", [name for _, name in socket.if_nameindex()])
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("CONNECTED")
except OSError as e:
    print("refused", type(e).__name__)
try:
    socket.getaddrinfo("en.wikipedia.org", 443)
    print("RESOLVED")
except OSError as e:
    print("no dns", type(e).__name__)
"""
    try:
        result = sandbox.run(code)
        assert result.ok, result.format()
        assert "CONNECTED" not in result.stdout and "RESOLVED" not in result.stdout
        assert "interfaces ['lo']" in result.stdout
        with pytest.raises(socket.timeout):
            server.accept()  # nothing reached the host's server
    finally:
        server.close()


def test_no_abstract_unix_sockets_of_the_host(sandbox):
    # Abstract unix sockets have no file to hide; they belong to the network namespace.
    name = f"\0websailor-test-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(1)
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.connect(name)  # reachable from the host
        probe.close()
        code = f"""
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({name!r})
    print("CONNECTED")
except OSError as e:
    print("refused", type(e).__name__)
"""
        result = sandbox.run(code)
        assert result.stdout.startswith("refused"), result.format()
    finally:
        server.close()


def test_sees_only_its_own_processes(sandbox):
    result = sandbox.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert result.ok and result.stdout.strip() == "[1, 2]", result.format()  # bubblewrap's init, then us


def test_fork_bomb_is_contained(sandbox):
    marker = "fb" + uuid.uuid4().hex[:12]
    code = f"""
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"{marker}", 0, 0, 0)  # PR_SET_NAME: the host finds us by this name
told = False
while True:
    try:
        os.fork()
    except OSError as e:
        if not told:
            print("fork failed:", e, file=sys.stderr, flush=True)
            told = True
"""
    result = sandbox.run(code)
    assert result.status in ("timeout", "killed"), result.format()
    assert "fork failed" in result.stderr  # the process limit was reached, not the host's
    assert "[limit] At most 16 processes" in result.format()
    assert result.duration_s < FAST.wall_seconds + 5
    assert processes_named(marker) == []
    assert_host_responsive(sandbox)


def test_memory_bomb_is_contained(sandbox):
    code = """
hog = []
while True:
    hog.append(bytearray(32 << 20))
"""
    result = sandbox.run(code)
    assert result.status == "error", result.format()
    assert "MemoryError" in result.stderr
    assert "[limit] Memory is limited to 256 MiB" in result.format()
    assert_host_responsive(sandbox)


def test_infinite_loop_is_stopped(sandbox):
    result = sandbox.run("while True:\n    pass\n")
    assert result.status in ("timeout", "killed"), result.format()
    assert result.duration_s < FAST.wall_seconds + 3
    assert "[timeout]" in result.format() or "[limit] CPU time is limited to 2 s" in result.format()


def test_output_flood_is_capped(sandbox):
    result = sandbox.run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert result.status in ("timeout", "killed"), result.format()
    assert result.truncated and result.stdout_bytes > 100 * FAST.output_cap_bytes
    assert len(result.stdout) < FAST.output_cap_bytes + 300
    assert "[output truncated:" in result.stdout
    assert "[limit] Output is capped at 2000 bytes per stream" in result.format()


def test_sleeping_past_the_deadline_is_killed(sandbox):
    result = sandbox.run("import time\nprint('before', flush=True)\ntime.sleep(60)\n")
    assert result.timed_out and result.status == "timeout"
    assert result.stdout.strip() == "before"  # output up to the kill is kept
    assert "[timeout] The program exceeded the wall-clock limit of 4 s" in result.format()
    assert FAST.wall_seconds - 0.5 < result.duration_s < FAST.wall_seconds + 3


def test_closing_output_and_sleeping_is_still_killed(sandbox):
    marker = "cs" + uuid.uuid4().hex[:12]
    code = f"""
import ctypes, os, time
ctypes.CDLL(None).prctl(15, b"{marker}", 0, 0, 0)
os.close(1); os.close(2)
time.sleep(60)
"""
    result = sandbox.run(code)
    assert result.timed_out, result.format()
    assert result.duration_s < FAST.wall_seconds + 3
    assert processes_named(marker) == []


def test_killing_the_parent_and_everyone_reaches_nothing_outside(tmp_path):
    # One fixed uid, so that a host process of the very same uid can stand as the target:
    # only the PID namespace protects it (when not root, it is simply the caller's uid).
    uid_base = 1_500_000_000 + 4096 + os.getpid() % 100_000
    sandbox = require_sandbox(replace(FAST, uid_base=uid_base, uid_count=1))
    as_user = {"user": uid_base, "group": uid_base, "extra_groups": []} if os.geteuid() == 0 else {}
    bystander = subprocess.Popen(["sleep", "60"], cwd="/", **as_user)
    try:
        code = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
for target in (os.getppid(), -1):
    os.kill(target, signal.SIGKILL)
    print("sent", target, flush=True)
print("child", child.wait(), flush=True)
subprocess.run([sys.executable, "-c", "import os; os.kill(-1, 9)"])  # from a child: kills this program too
print("not reached")
"""
        result = sandbox.run(code)
        assert "sent 1\nsent -1\nchild -9\n" in result.stdout, result.format()
        assert result.signal == signal.SIGKILL and "not reached" not in result.stdout
        time.sleep(0.2)
        assert bystander.poll() is None, "a host process of the same uid was killed"
        assert_host_responsive(sandbox)
    finally:
        bystander.kill()
        bystander.wait()


DAEMON = """
import ctypes, os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"{marker}", 0, 0, 0)
        for fd in (0, 1, 2):
            os.close(fd)
        os.write(w, b"up")
        while True:
            time.sleep(0.05)
    os._exit(0)
print("daemon", os.read(r, 2).decode(), flush=True)
time.sleep({linger})
"""


def test_daemon_does_not_outlive_the_call(sandbox):
    marker = "dm" + uuid.uuid4().hex[:12]
    # First show the host does see the daemon while the call runs ...
    seen: list[list[int]] = []
    call = threading.Thread(target=lambda: seen.append(
        sandbox.run(DAEMON.format(marker=marker, linger=2.0)).stdout))
    call.start()
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline and not processes_named(marker):
        time.sleep(0.05)
    spotted = processes_named(marker)
    call.join()
    assert spotted, "the host-side check never saw the daemon running"
    assert "daemon up" in seen[0]
    assert processes_named(marker) == []
    # ... then that one started just before the main program exits is gone at once.
    result = sandbox.run(DAEMON.format(marker=marker, linger=0))
    assert result.ok and "daemon up" in result.stdout, result.format()
    assert processes_named(marker) == []


def test_huge_file_and_filling_the_disk_are_capped(sandbox):
    one_file = """
with open("big", "wb") as f:
    while True:
        f.write(b"\\0" * (1 << 20))
"""
    result = sandbox.run(one_file)
    assert result.status == "error", result.format()
    assert "File too large" in result.stderr
    assert "[limit] Files are limited to 4 MiB each." in result.format()
    many_files = """
i = 0
while True:
    with open(f"part{i}", "wb") as f:
        f.write(b"\\0" * (3 << 20))
    i += 1
"""
    result = sandbox.run(many_files)
    assert "No space left on device" in result.stderr, result.format()
    assert "[limit] The work directory /tmp holds at most 16 MiB." in result.format()


def test_sixteen_concurrent_executions_do_not_see_each_other(sandbox):
    code = """
import json, os, time
with open("/tmp/mine-{i}", "w") as f:
    f.write("token-{i}")
time.sleep(0.5)
files = sorted(os.listdir("/tmp"))
print(json.dumps({{"files": files, "content": [open("/tmp/" + n).read() for n in files]}}))
"""
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: sandbox.run(code.format(i=i)), range(16)))
    for i, result in enumerate(results):
        assert result.ok, result.format()
        seen = _json_lines(result.stdout)
        assert seen == {"files": [f"mine-{i}"], "content": [f"token-{i}"]}


def test_pure_python_escape_only_reaches_the_sandbox(sandbox):
    # The classic restricted-exec escape: find os.system through object's subclasses.
    code = """
for cls in ().__class__.__base__.__subclasses__():
    if cls.__name__ == "_wrap_close":
        system = cls.__init__.__globals__["system"]
        print("shell", system("cat /etc/shadow; ls /root; id -u; echo escaped-to-shell"), flush=True)
        break
import os
print(os.getuid(), os.path.exists("/etc/shadow"), os.path.exists("/root"), os.path.exists("/bin/sh"))
"""
    result = sandbox.run(code)
    # There is no shell in the sandbox at all (only the interpreter's own paths), and nothing of the host.
    assert "escaped-to-shell" not in result.stdout and "root:" not in result.stdout, result.format()
    assert result.stdout.splitlines()[0] == f"shell {127 << 8}"
    assert result.stdout.splitlines()[1] == "1000 False False False"


def test_no_capabilities_and_no_nested_user_namespaces(sandbox):
    code = """
import ctypes, os
status = open("/proc/self/status").read()
print([line for line in status.splitlines() if line.startswith(("CapEff", "CapPrm", "NoNewPrivs"))])
libc = ctypes.CDLL(None, use_errno=True)
print("unshare", libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))
"""
    result = sandbox.run(code)
    assert result.ok, result.format()
    assert "'CapEff:\\t0000000000000000'" in result.stdout
    assert "'NoNewPrivs:\\t1'" in result.stdout
    assert "unshare -1" in result.stdout


def test_signal_exit_is_reported(sandbox):
    result = sandbox.run("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert result.status == "killed" and result.signal == signal.SIGTERM
    assert "[exit status: killed by SIGTERM]" in result.format()
