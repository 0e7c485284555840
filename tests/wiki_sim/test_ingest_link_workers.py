"""The JSONL link pass in worker processes: the same pages, links and order as in one process;
a page that fails there is a one-line error naming file:line, and the build leaves nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3

import pytest

import wiki_sim.ingest.jsonl as jsonl
from wiki_sim.build import build
from wiki_sim.errors import WikiSimError
from wiki_sim.ingest import open_source
from wiki_sim.ingest.entity_links import EntityLinker
from wiki_sim.sources import fetch_default_corpus

from tests.wiki_sim.simhelpers import leftovers


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """600 real articles of the default corpus as {"title", "text"} lines, some with sections."""
    data = json.loads(fetch_default_corpus().read_text(encoding="utf-8"))
    rows = [{"title": v["title"], "text": v["extract"]} for v in list(data.values())[:600]]
    for r in rows[::7]:
        r["text"] += "\n\n## History\n\nLater events of " + r["title"] + "."
    path = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(jsonl, "BATCH_PAGES", 16)  # many batches, so the pool reorders and bounds them


def _pages(path, workers):
    source = open_source("jsonl", path, workers=workers, progress=False)
    pages = [(p.title, p.text, p.lead, p.sections, p.links, p.link_starts, p.aliases, p.url, p.facts)
             for p in source]
    return pages, dict(source.stats)


def test_workers_give_the_single_process_pages_links_and_order(corpus, small_batches):
    one, stats_one = _pages(corpus, 1)
    two, stats_two = _pages(corpus, 2)
    three, _ = _pages(corpus, 3)
    assert stats_one["links"] > 300 and sum(1 for p in one if p[6]) > 50  # links and aliases to compare
    assert two == one and three == one
    assert stats_two == stats_one
    assert not multiprocessing.active_children()


def test_store_is_byte_identical_with_workers(tmp_path, corpus, small_batches):
    dumps = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        build("jsonl", corpus, out, workers=workers, progress=False)
        conn = sqlite3.connect(f"file:{out / 'store.sqlite'}?mode=ro", uri=True)
        dumps.append(list(conn.iterdump()))
        conn.close()
    assert len(dumps[0]) > 1000 and dumps[0] == dumps[1]


def _fail_on(monkeypatch, title, action):
    find = EntityLinker.find

    def failing(self, text, self_title=""):
        if self_title == title:
            action()
        return find(self, text, self_title)

    monkeypatch.setattr(EntityLinker, "find", failing)


def _line_of(path, title):
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if json.loads(line)["title"] == title:
            return lineno
    raise AssertionError(title)


def _raise():
    raise ValueError("broken page")


def test_a_page_failing_in_a_worker_names_its_line(corpus, small_batches, monkeypatch):
    title = json.loads(corpus.read_text(encoding="utf-8").splitlines()[100])["title"]
    _fail_on(monkeypatch, title, _raise)
    with pytest.raises(WikiSimError) as err:
        _pages(corpus, 2)
    msg = str(err.value)
    assert msg.startswith(f"{corpus}:{_line_of(corpus, title)}: finding links in page {title!r} failed")
    assert "ValueError: broken page" in msg and "\n" not in msg
    assert not multiprocessing.active_children()


def test_a_killed_worker_names_the_line_and_the_build_leaves_nothing(tmp_path, corpus, small_batches,
                                                                     monkeypatch):
    title = json.loads(corpus.read_text(encoding="utf-8").splitlines()[250])["title"]
    parent = os.getpid()
    _fail_on(monkeypatch, title, lambda: os.getpid() != parent and os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(WikiSimError) as err:
        build("jsonl", corpus, tmp_path / "wiki", workers=2, progress=False)
    msg = str(err.value)
    assert f"{corpus}:{_line_of(corpus, title)}: " in msg and "link worker died (killed by signal 9)" in msg
    assert "\n" not in msg
    assert not (tmp_path / "wiki").exists() and leftovers(tmp_path) == []
    assert not multiprocessing.active_children()


def test_a_bad_line_in_the_second_pass_names_it_with_workers(tmp_path, corpus, small_batches, monkeypatch):
    """The file changes between the passes: line 300 becomes malformed JSON after the titles were read."""
    path = tmp_path / "c.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines), encoding="utf-8")
    init = EntityLinker.__init__

    def after_first_pass(self, *args, **kwargs):
        init(self, *args, **kwargs)
        path.write_text("".join(lines[:299] + ['{"title": "Broken", "text": \n'] + lines[300:]), encoding="utf-8")

    monkeypatch.setattr(EntityLinker, "__init__", after_first_pass)
    with pytest.raises(WikiSimError, match=rf"^{path}:300: malformed JSONL line") as err:
        _pages(path, 2)
    assert "\n" not in str(err.value)
    assert not multiprocessing.active_children()


_SLOW_PASS = r"""
import sys, time
from pathlib import Path
import wiki_sim.ingest.jsonl as jsonl
from wiki_sim.ingest import fresh_stats
from wiki_sim.ingest.entity_links import EntityLinker

jsonl.BATCH_PAGES = 4
find = EntityLinker.find
def slow(self, text, self_title=""):
    time.sleep(0.02)
    return find(self, text, self_title)
EntityLinker.find = slow
for i, page in enumerate(jsonl.iter_jsonl(Path(sys.argv[1]), fresh_stats(), workers=2)):
    if i == 0:
        print("linking", flush=True)
"""


def test_workers_exit_when_the_build_process_is_killed(corpus):
    import subprocess
    import sys

    from tests.wiki_sim.simhelpers import alive, descendants, wait_for

    proc = subprocess.Popen([sys.executable, "-c", _SLOW_PASS, str(corpus)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "linking\n"
        workers = descendants(proc.pid)
        assert len(workers) == 2
        proc.kill()
        proc.wait()
        assert wait_for(lambda: not alive(workers), timeout=10), f"link workers {alive(workers)} outlived the build"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
