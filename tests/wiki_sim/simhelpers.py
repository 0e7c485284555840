"""Helpers for the simulator tests: small JSONL corpora built into real simulators."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Iterable

from wiki_sim.build import build


def write_jsonl(path: Path, pages: Iterable[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for title, text in pages:
            f.write(json.dumps({"title": title, "text": text}) + "\n")
    return path


def build_jsonl(tmp_path: Path, pages: Iterable[tuple[str, str]], name: str = "wiki", workers: int = 2,
                engine: str = "whoosh") -> Path:
    """A simulator built from ``pages`` through the JSONL source with the search ``engine``;
    returns its directory."""
    corpus = write_jsonl(tmp_path / f"{name}.jsonl", pages)
    out = tmp_path / name
    build("jsonl", corpus, out, workers=workers, progress=False, engine=engine)
    return out


# Every search test runs on both engines (tantivy is in the test extra).
ENGINES = ("whoosh", "tantivy")


def leftovers(parent: Path) -> list[str]:
    """Temporary build directories beside simulators in ``parent``."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".") and
                  (".building-" in p.name or ".old-" in p.name))


def group_processes(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return pids


def _ppids() -> dict[int, int]:
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            out[int(stat.parent.name)] = int(fields[1])
    return out


def descendants(pid: int) -> set[int]:
    """Live processes below ``pid`` (children in other sessions included)."""
    ppids = _ppids()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in ppids.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (zombies excluded)."""
    return pids & set(_ppids())


def wait_for(predicate, timeout: float, interval: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of a process group this test started."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
