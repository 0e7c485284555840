"""A page that hangs or breaks the parser is skipped and counted; the build goes on, in order.

The dumps here are real pages of the gensim enwiki sample plus one bad page. The slow page
is real: ``{{a|`` repeated thousands of times takes mwparserfromhell tens of seconds
(superlinear in its length). The parser hooks below (passed to the worker processes by
name) reproduce what no real input does on demand: a parser stuck in C code that never
lets the SIGALRM handler run, a parser that raises, a worker that dies.
"""

from __future__ import annotations

import bz2
import os
import re
import signal
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest import open_source
from wiki_sim.ingest.wikitext import parse_page
from wiki_sim.records import Page
from wiki_sim.sources import fetch_gensim_sample

BAD_MARK = "{{a|{{a|{{a|"
SLOW_WIKITEXT = "{{a|" * 8000
HOOKS = __name__


def parse_ignoring_alarm(title, text, namespaces):
    """Parse with SIGALRM blocked on the bad page: like C code that never checks for signals."""
    if BAD_MARK in text:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    return parse_page(title, text, namespaces)


def parse_or_raise(title, text, namespaces):
    if BAD_MARK in text:
        raise ValueError("parser blew up")
    return parse_page(title, text, namespaces)


def parse_or_die(title, text, namespaces):
    if BAD_MARK in text:
        os._exit(3)  # a crash inside C code kills the process the same way
    return parse_page(title, text, namespaces)


def _page_xml(title: str, text: str, page_id: int) -> str:
    return (f"  <page>\n    <title>{escape(title)}</title>\n    <ns>0</ns>\n    <id>{page_id}</id>\n"
            f"    <revision>\n      <id>{page_id}</id>\n      <text xml:space=\"preserve\">{escape(text)}</text>\n"
            f"    </revision>\n  </page>\n")


@pytest.fixture(scope="module")
def small_articles():
    """Head and tail of the real export and its 6 shortest articles (not redirects), in dump order."""
    xml = bz2.decompress(fetch_gensim_sample().read_bytes()).decode("utf-8")
    first, last = xml.index("  <page>"), xml.rindex("</page>") + len("</page>\n")
    blocks = re.findall(r"  <page>.*?</page>\n", xml[first:last], re.S)
    articles = [b for b in blocks if "<redirect" not in b and "<ns>0</ns>" in b]
    shortest = sorted(sorted(articles, key=len)[:6], key=articles.index)
    return xml[:first], shortest, xml[last:]


def _dump(tmp_path: Path, small_articles, bad_at: int = 2) -> tuple[Path, list[str]]:
    head, blocks, tail = small_articles
    body = blocks[:bad_at] + [_page_xml("Bad page", SLOW_WIKITEXT, 999999)] + blocks[bad_at:]
    path = tmp_path / "with-bad-page.xml.bz2"
    path.write_bytes(bz2.compress((head + "".join(body) + tail).encode("utf-8")))
    titles = [re.search(r"<title>(.*?)</title>", b).group(1) for b in blocks]
    return path, titles


def _run(path: Path, parser: str | None = None, workers: int = 2):
    source = open_source("dump", path, workers=workers, page_timeout=1.0, progress=False,
                         _parser=parser, _hard_grace=1.0)
    records = list(source)
    return source.stats, records


def test_slow_page_times_out_and_the_rest_is_parsed_in_order(tmp_path, small_articles):
    path, titles = _dump(tmp_path, small_articles)
    stats, records = _run(path)
    assert [r.title for r in records] == titles
    assert stats["skipped"] == 1 and stats["skipped_timeout"] == 1 and stats["worker_restarts"] == 0
    assert stats["skipped_titles"] == ["Bad page: timeout after 1s"]


def test_parser_stuck_past_the_alarm_is_killed_and_replaced(tmp_path, small_articles):
    path, titles = _dump(tmp_path, small_articles)
    stats, records = _run(path, f"{HOOKS}:parse_ignoring_alarm")
    assert stats["skipped_stuck"] == 1 and stats["worker_restarts"] == 1
    assert stats["skipped_titles"][0].startswith("Bad page: parser stuck past 2s")
    # The pages before and after it in the same chunk were resubmitted: same records as a clean run.
    _, reference = _run(path)
    assert records == reference and [r.title for r in records] == titles


@pytest.mark.parametrize("hook, kind", [("parse_or_raise", "error"), ("parse_or_die", "crash")])
def test_page_that_breaks_the_parser_or_kills_the_worker_is_skipped(tmp_path, small_articles, hook, kind):
    path, titles = _dump(tmp_path, small_articles, bad_at=4)
    stats, records = _run(path, f"{HOOKS}:{hook}", workers=1)
    assert [r.title for r in records] == titles
    assert stats[f"skipped_{kind}"] == 1 and stats["skipped"] == 1
    assert stats["worker_restarts"] == (1 if kind == "crash" else 0)
    assert all(isinstance(r, Page) and r.text for r in records)


def _worker_pids() -> list[int]:
    """Live parser workers started by this process (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"wiki_sim.ingest.worker" in cmdline:
            pids.append(int(entry.name))
    return pids


def test_stopping_early_leaves_no_worker_behind(tmp_path, small_articles):
    path, titles = _dump(tmp_path, small_articles)
    it = iter(open_source("dump", path, workers=2, page_timeout=1.0, progress=False))
    assert next(it).title == titles[0]
    assert _worker_pids()  # one chunk here, so one worker
    it.close()
    assert _worker_pids() == []


def test_a_worker_that_cannot_start_is_a_clear_error(tmp_path, small_articles):
    path, _ = _dump(tmp_path, small_articles)
    with pytest.raises(WikiSimError, match=r"a parser worker failed to start \(exit code 1\)"):
        _run(path, f"{HOOKS}:no_such_parser")
