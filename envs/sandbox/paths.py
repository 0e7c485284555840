"""The host paths the sandboxed interpreter needs, and nothing else of the host.

Asked of the interpreter itself, once per process (it is trusted configuration, run on the
host with ``-I`` as in the sandbox): its module search path (the standard library,
``lib-dynload``, the system ``dist-packages``), the directories of the shared libraries it
loads (importing the standard library's extension modules first, so that ``libssl``,
``libsqlite3``, ``libffi`` and the like are among them), and its dynamic loader. With the
executable itself and ``prlimit``, that is what the sandbox binds, read-only; the rest of
``/usr`` (``/usr/local/etc``, ``/usr/share``, ``/usr/sbin``, other programs) is not there.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import subprocess
from pathlib import Path

from envs.sandbox.config import SandboxUnavailableError, descriptor_advice, out_of_descriptors

_PROBE = r"""
import importlib, json, os, sys
for name in ("ssl", "sqlite3", "ctypes", "decimal", "zlib", "bz2", "lzma", "hashlib", "_json", "math",
             "select", "mmap", "readline", "curses", "uuid", "pyexpat", "unicodedata", "_multiprocessing"):
    try:
        importlib.import_module(name)
    except Exception:
        pass
libs = set()
exe = os.path.realpath(sys.executable)
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        mapped = parts[5].strip().removesuffix(" (deleted)") if len(parts) == 6 else ""
        if mapped.startswith("/") and mapped != exe:  # the executable is bound alone, not its directory
            libs.add(os.path.dirname(mapped))
print(json.dumps({"path": [p for p in sys.path if p], "libs": sorted(libs)}))
"""


def elf_interpreter(path: str) -> str | None:
    """The dynamic loader an ELF executable names (``PT_INTERP``), or None (static, or not ELF)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only; others get no loader bound
                return None
            order = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack_from(order + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                kind, = struct.unpack_from(order + "I", table, i * phentsize)
                if kind == 3:  # PT_INTERP
                    offset, = struct.unpack_from(order + "Q", table, i * phentsize + 8)
                    size, = struct.unpack_from(order + "Q", table, i * phentsize + 32)
                    f.seek(offset)
                    return f.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _canonical(path: str) -> str:
    """``path`` with a top-level link (``/lib64 -> usr/lib64`` on merged-/usr hosts) resolved,
    so that binding it does not go through the link the sandbox recreates."""
    parts = Path(path).parts
    if len(parts) > 1:
        top = Path("/", parts[1])
        if top.is_symlink():
            return os.path.normpath(os.path.join("/", os.readlink(top), *parts[2:]))
    return path


def _outermost(paths: list[str]) -> list[str]:
    """Existing directories of ``paths``, without those inside another one, sorted."""
    out: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths if os.path.isdir(p)}):
        if not any(path == o or path.startswith(o.rstrip("/") + "/") for o in out):
            out.append(path)
    return out


@functools.lru_cache(maxsize=8)
def interpreter_binds(python: str, prlimit: str) -> tuple[tuple[str, str], ...]:
    """``(host path, sandbox path)`` pairs to bind read-only for ``python`` and ``prlimit``."""
    try:
        done = subprocess.run([python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        info = json.loads(done.stdout)
    except OSError as exc:
        if out_of_descriptors(exc):
            raise SandboxUnavailableError(descriptor_advice(f"could not run {python}", exc)) from None
        raise SandboxUnavailableError(
            f"could not ask the sandbox's interpreter {python} for its paths ({exc}): SandboxConfig.python must "
            f"be a working Python 3 on this host (`apt-get install python3`)"
        ) from None
    except (subprocess.SubprocessError, ValueError) as exc:
        raise SandboxUnavailableError(
            f"could not ask the sandbox's interpreter {python} for its paths ({exc}): SandboxConfig.python must "
            f"be a working Python 3 on this host (`apt-get install python3`)"
        ) from None
    dirs = _outermost([_canonical(p) for p in [*info["path"], *info["libs"]]])
    binds = [(d, d) for d in dirs]
    for program in (python, prlimit):
        binds.append((program, _canonical(program)))
        loader = elf_interpreter(os.path.realpath(program))
        if loader and os.path.exists(loader):
            binds.append((loader, _canonical(loader)))
    seen: set[str] = set()
    unique = []
    for host, inside in binds:
        if inside not in seen and not any(inside.startswith(d.rstrip("/") + "/") for d in dirs):
            seen.add(inside)
            unique.append((host, inside))
    return tuple(unique)
