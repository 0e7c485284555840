"""Bad dumps and bad arguments: one clear line, raised at open when visible at once, else mid-stream."""

from __future__ import annotations

import bz2
import os

import pytest

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest import open_source
from wiki_sim.sources import fetch_gensim_sample


@pytest.fixture(scope="module")
def sample_bytes():
    return fetch_gensim_sample().read_bytes()


def _one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert msg and "\n" not in msg
    return msg


def test_truncated_bz2_fails_mid_stream(tmp_path, sample_bytes):
    path = tmp_path / "truncated.xml.bz2"
    path.write_bytes(sample_bytes[: len(sample_bytes) // 4])
    source = open_source("dump", path, workers=1, progress=False)  # the start is fine
    with pytest.raises(WikiSimError, match="truncated") as err:
        list(source)
    _one_line(err)


def test_corrupt_bz2_data(tmp_path, sample_bytes):
    data = bytearray(sample_bytes)
    data[200_000:200_400] = os.urandom(400)
    path = tmp_path / "corrupt.xml.bz2"
    path.write_bytes(bytes(data))
    with pytest.raises(WikiSimError, match="corrupt") as err:
        list(open_source("dump", path, workers=1, progress=False))
    _one_line(err)


def test_random_bytes_named_bz2(tmp_path):
    path = tmp_path / "random.xml.bz2"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(WikiSimError, match="not a valid .bz2 file") as err:
        open_source("dump", path)
    _one_line(err)
    path.write_bytes(b"BZh9" + os.urandom(4096))  # right magic, garbage after
    with pytest.raises(WikiSimError, match="corrupt") as err:
        open_source("dump", path)
    _one_line(err)


@pytest.mark.parametrize("name, content", [
    ("page.html", b"<!DOCTYPE html>\n<html><head><title>Wikipedia</title></head><body>hi</body></html>"),
    ("feed.xml", b'<?xml version="1.0"?>\n<rss version="2.0"><channel><title>x</title></channel></rss>'),
    ("notes.xml.bz2", bz2.compress(b"just some text, not XML at all\n" * 100)),
])
def test_not_a_mediawiki_export(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(WikiSimError, match="not a MediaWiki XML export") as err:
        open_source("dump", path)
    _one_line(err)


def test_export_without_articles_and_truncated_plain_xml(tmp_path, sample_bytes):
    xml = bz2.decompress(sample_bytes).decode()
    head, tail = xml[: xml.index("  <page>")], "</mediawiki>\n"
    nupedia = xml.index("<title>Wikipedia:Adding")
    only_project_page = xml[xml.rindex("  <page>", 0, nupedia): xml.index("</page>", nupedia) + 8]
    path = tmp_path / "no-articles.xml"
    path.write_text(head + only_project_page + tail)
    with pytest.raises(WikiSimError, match="no main-namespace articles"):
        list(open_source("dump", path, workers=1, progress=False))
    path = tmp_path / "cut.xml"
    path.write_text(xml[: len(xml) // 20])
    with pytest.raises(WikiSimError, match="not well-formed XML or is truncated") as err:
        list(open_source("dump", path, workers=1, progress=False))
    _one_line(err)


def test_bad_arguments(tmp_path):
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"")
    cases = [
        (lambda: open_source("dump", tmp_path / "missing.xml.bz2"), "does not exist"),
        (lambda: open_source("dump", empty), "is empty"),
        (lambda: open_source("dump"), "needs a PATH"),
        (lambda: open_source("gensim-sample", empty), "takes no PATH"),
        (lambda: open_source("wikipedia"), "unknown source kind 'wikipedia'; expected one of default, dump"),
        (lambda: open_source("gensim-sample", workers=0), "workers must be an integer >= 1, got 0"),
        (lambda: open_source("gensim-sample", page_timeout=0), "page_timeout must be > 0"),
    ]
    for call, message in cases:
        with pytest.raises(WikiSimError, match=message):
            call()
