"""A page over the wikitext size cap is skipped before any worker sees it (bounded parse memory)."""

from __future__ import annotations

import bz2

from wiki_sim.ingest import open_source
from wiki_sim.ingest.wikitext import parse_page
from wiki_sim.ingest.xml_dump import MAX_WIKITEXT_CHARS

from .test_ingest_timeout import _page_xml, small_articles  # noqa: F401 (fixture)


def parse_refusing_big(title, text, namespaces):
    if len(text) > MAX_WIKITEXT_CHARS:
        raise AssertionError("a page over the cap reached a parser worker")
    return parse_page(title, text, namespaces)


def test_a_page_over_the_cap_is_skipped_and_recorded(tmp_path, small_articles):  # noqa: F811
    head, blocks, tail = small_articles
    huge = _page_xml("Huge page", "[[a]] " * (MAX_WIKITEXT_CHARS // 6 + 1), 999998)
    path = tmp_path / "huge.xml.bz2"
    path.write_bytes(bz2.compress((head + "".join(blocks[:2] + [huge] + blocks[2:]) + tail).encode("utf-8")))
    source = open_source("dump", path, workers=1, progress=False,
                         _parser="tests.wiki_sim.test_ingest_page_cap:parse_refusing_big")
    records = list(source)
    assert len(records) == len(blocks) and "Huge page" not in [r.title for r in records]
    assert source.stats["skipped"] == 1 and source.stats["skipped_too_large"] == 1
    assert source.stats["skipped_titles"][0].startswith("Huge page: wikitext of ")
