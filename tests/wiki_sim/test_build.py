"""Atomic, idempotent builds: build.json last, failures and interrupts leave the old simulator intact."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys

import pytest

from tests.wiki_sim.simhelpers import build_jsonl, leftovers, write_jsonl
from wiki_sim import WikiSim, WikiSimError
from wiki_sim.build import build, check_out_dir, clean_leftovers, swap_into_place
from wiki_sim.sim import BUILD_FORMAT
from wiki_sim.store import StoreWriter

PAGES = [
    ("Lighthouse", "A lighthouse is a tower that emits light to guide ships at sea.\n\n## History\nThe Pharos of "
                   "Alexandria was an early lighthouse."),
    ("Harbour", "A harbour is a sheltered body of water where ships and boats can be docked."),
    ("Fog signal", "A fog signal is a device that uses sound to warn ships of hazards when visibility is poor."),
    ("Buoy", "A buoy is a floating device moored to the seabed that marks channels for ships."),
]


def table_dump(db_path):
    conn = sqlite3.connect(db_path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("pages", "redirects", "links", "facts")}
    finally:
        conn.close()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_build_record_is_complete_and_written_last(tmp_path):
    out = build_jsonl(tmp_path, PAGES)
    info = json.loads((out / "build.json").read_text())
    assert info["format"] == BUILD_FORMAT == 4 and info["source"]["kind"] == "jsonl"
    assert info["counts"]["pages"] == info["counts"]["documents_indexed"] == len(PAGES)
    assert info["source_fingerprint"]["size"] == (tmp_path / "wiki.jsonl").stat().st_size
    assert info["versions"]["whoosh"] == "2.7.5"
    assert all(v >= 0 for v in info["durations_s"].values())
    last_data_write = max(p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != "build.json")
    assert (out / "build.json").stat().st_mtime_ns >= last_data_write
    mode = stat.S_IMODE(out.stat().st_mode)
    assert mode == 0o777 & ~_umask()  # not mkdtemp's private 0700
    assert leftovers(tmp_path) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_rebuild_is_idempotent(tmp_path):
    out = build_jsonl(tmp_path, PAGES)
    first = table_dump(out / "store.sqlite")
    results = WikiSim(out).search(["ships warning sound", "tower light"], k=3)
    build("jsonl", tmp_path / "wiki.jsonl", out, progress=False)
    assert table_dump(out / "store.sqlite") == first
    assert WikiSim(out).search(["ships warning sound", "tower light"], k=3) == results
    assert leftovers(tmp_path) == []


def test_a_failed_build_leaves_the_old_simulator_intact(tmp_path):
    out = build_jsonl(tmp_path, PAGES)
    before = (out / "build.json").read_text()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "A", "text": "fine"}\n{"title": "B", "text": \n')
    with pytest.raises(WikiSimError, match=r"bad.jsonl:2"):
        build("jsonl", bad, out, progress=False)
    assert (out / "build.json").read_text() == before
    assert WikiSim(out).search(["lighthouse"])[0][0].title == "Lighthouse"
    assert leftovers(tmp_path) == []


def test_an_interrupt_mid_build_leaves_the_old_simulator_intact(tmp_path, monkeypatch):
    out = build_jsonl(tmp_path, PAGES)
    before = (out / "build.json").read_text()
    calls = []
    original = StoreWriter.add_page

    def interrupted(self, page):
        calls.append(page.title)
        if len(calls) == 3:
            raise KeyboardInterrupt
        original(self, page)

    monkeypatch.setattr(StoreWriter, "add_page", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build("jsonl", tmp_path / "wiki.jsonl", out, progress=False)
    assert (out / "build.json").read_text() == before
    assert leftovers(tmp_path) == []


def test_empty_corpus_leaves_nothing(tmp_path):
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    with pytest.raises(WikiSimError):
        build("jsonl", empty, tmp_path / "wiki", progress=False)
    assert not (tmp_path / "wiki").exists() and leftovers(tmp_path) == []


def test_out_that_is_not_a_simulator_is_refused(tmp_path):
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(WikiSimError, match="not a simulator"):
        check_out_dir(precious)
    with pytest.raises(WikiSimError, match="not a simulator"):
        build("jsonl", write_jsonl(tmp_path / "c.jsonl", PAGES), precious, progress=False)
    assert (precious / "thesis.tex").read_text() == "do not delete"
    (tmp_path / "file").write_text("x")
    with pytest.raises(WikiSimError, match="not a directory"):
        check_out_dir(tmp_path / "file")
    check_out_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    check_out_dir(tmp_path / "empty")
    half = tmp_path / "half"
    half.mkdir()
    (half / "store.sqlite").write_text("")
    with pytest.raises(WikiSimError, match="not a simulator"):  # a name proves nothing (builds are atomic)
        check_out_dir(half)


def test_leftovers_of_dead_builds_are_removed_and_live_ones_kept(tmp_path):
    out = tmp_path / "wiki"
    dead = tmp_path / f".wiki.building-{dead_pid()}-abc"
    dead.mkdir()
    (dead / "store.sqlite").write_text("partial")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f".wiki.building-{sleeper.pid}-xyz"
        live.mkdir()
        other = tmp_path / f".other.building-{dead_pid()}-abc"
        other.mkdir()
        assert clean_leftovers(out) == [dead.name]
        assert live.exists() and other.exists() and not dead.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_old_simulator_caught_between_the_renames_is_put_back(tmp_path):
    built = build_jsonl(tmp_path, PAGES)
    aside = tmp_path / f".wiki.old-{dead_pid()}-q"
    os.rename(built, aside)
    clean_leftovers(tmp_path / "wiki")
    assert (tmp_path / "wiki" / "build.json").is_file() and not aside.exists()
    assert WikiSim(tmp_path / "wiki").search(["buoy"])[0][0].title == "Buoy"


def test_swap_into_place(tmp_path):
    out, new = tmp_path / "out", tmp_path / "new"
    out.mkdir()
    (out / "old.txt").write_text("old")
    new.mkdir()
    (new / "new.txt").write_text("new")
    swap_into_place(new, out)
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_reuse_keeps_a_current_simulator_and_rebuilds_a_stale_one(tmp_path):
    out = build_jsonl(tmp_path, PAGES)
    before = (out / "build.json").read_text()
    info = build("jsonl", tmp_path / "wiki.jsonl", out, progress=False, reuse=True)
    assert info["reused"] is True and (out / "build.json").read_text() == before
    write_jsonl(tmp_path / "wiki.jsonl", PAGES[:2])
    info = build("jsonl", tmp_path / "wiki.jsonl", out, progress=False, reuse=True)
    assert "reused" not in info and info["counts"]["pages"] == 2


def test_an_older_format_is_refused_with_rebuild_and_rebuilt_on_reuse(tmp_path):
    """Format 3 added documents' own URLs, page names and judged derived links: a format-2 simulator
    must be rebuilt, and setup_wiki.sh's --reuse build does rebuild it."""
    out = build_jsonl(tmp_path, PAGES)
    info = json.loads((out / "build.json").read_text())
    (out / "build.json").write_text(json.dumps({**info, "format": 2}))
    with pytest.raises(WikiSimError, match=r"built in format 2.*rebuild it"):
        WikiSim(out)
    info = build("jsonl", tmp_path / "wiki.jsonl", out, progress=False, reuse=True)
    assert "reused" not in info and info["format"] == BUILD_FORMAT
    with WikiSim(out) as sim:
        assert sim.link_summary()["derived"] is True
