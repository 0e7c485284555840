"""JSONL corpora: {"title", "text"} and wiki-18 {"id", "contents"}, built from real article text."""

from __future__ import annotations

import bz2
import json

import pytest

from wiki_sim.errors import WikiSimError
from wiki_sim.ingest import open_source
from wiki_sim.sources import fetch_default_corpus


@pytest.fixture(scope="module")
def articles():
    """30 real (title, text) pairs from the default corpus, long enough to split into passages."""
    data = json.loads(fetch_default_corpus().read_text(encoding="utf-8"))
    chosen = [(v["title"], v["extract"]) for v in data.values() if len(v["extract"].split()) > 120]
    return chosen[:30]


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _wiki18_rows(articles, words=50):
    """Each article cut into `words`-word passages, FlashRAG style: contents = '"Title"\\ntext'."""
    rows = []
    for title, text in articles:
        tokens = text.split()
        for i in range(0, len(tokens), words):
            rows.append({"id": str(len(rows)), "contents": f'"{title}"\n' + " ".join(tokens[i:i + words])})
    return rows


def test_title_text_lines_with_markdown_sections(tmp_path, articles):
    rows = [{"title": t, "text": x} for t, x in articles]
    rows[0]["text"] = rows[0]["text"] + "\n\n## History\n\nLater events.\n\n### Detail\n\nMore."
    source = open_source("jsonl", _write(tmp_path / "c.jsonl", rows + [""]), progress=False)
    pages = list(source)
    assert [p.title for p in pages] == [t for t, _ in articles]
    assert pages[0].sections == ["History", "Detail"] and pages[0].lead == articles[0][1]
    assert pages[1].text == pages[1].lead == articles[1][1]
    assert source.stats["pages"] == 30 and source.stats["lines"] == 30


def test_wiki18_passages_of_a_title_are_merged(tmp_path, articles):
    rows = _wiki18_rows(articles)
    assert len(rows) > 2 * len(articles)
    path = tmp_path / "wiki18.jsonl.bz2"
    path.write_bytes(bz2.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    source = open_source("jsonl", path, progress=False)
    pages = list(source)
    assert [p.title for p in pages] == [t for t, _ in articles]
    for page, (_, text) in zip(pages, articles):
        assert page.text.replace("\n\n", " ") == " ".join(text.split())
        assert page.text.count("\n\n") == -(-len(text.split()) // 50) - 1
    assert source.stats["passages_merged"] == len(rows) - len(articles)


def test_a_title_seen_again_later_is_a_new_page(tmp_path, articles):
    """A namesake with other text is renamed (the store keeps one page per title); a repeat is skipped."""
    rows = _wiki18_rows(articles[:2])
    first = [r for r in rows if r["contents"].startswith(f'"{articles[0][0]}"')]
    source = open_source("jsonl", _write(tmp_path / "c.jsonl", rows + first[:1]), progress=False)
    pages = list(source)
    assert [p.title for p in pages] == [articles[0][0], articles[1][0], articles[0][0] + " (2)"]
    assert source.stats["duplicate_titles"] == 1
    repeat = [{"title": t, "text": x} for t, x in articles[:2]] * 2
    source = open_source("jsonl", _write(tmp_path / "r.jsonl", repeat), progress=False)
    assert [p.title for p in source] == [articles[0][0], articles[1][0]]
    assert source.stats["duplicates_skipped"] == 2


@pytest.mark.parametrize("bad, message", [
    ('{"title": "X", "text": "broken', r"c\.jsonl:3: malformed JSONL line"),
    ('["a", "list"]', r"c\.jsonl:3: expected a JSON object, got list"),
    ('{"name": "X", "body": "y"}', r"c\.jsonl:3: expected string fields"),
    ('{"id": "1", "contents": "no title line"}', r'c\.jsonl:3: wiki-18 "contents"'),
    ('{"title": "", "text": "y"}', r"c\.jsonl:3: empty title"),
])
def test_malformed_line_names_its_line_number(tmp_path, articles, bad, message):
    rows = [{"title": t, "text": x} for t, x in articles[:2]] + [bad]
    source = open_source("jsonl", _write(tmp_path / "c.jsonl", rows), progress=False)
    with pytest.raises(WikiSimError, match=message) as err:
        list(source)
    assert "\n" not in str(err.value)


def test_empty_corpus_is_an_error(tmp_path):
    with pytest.raises(WikiSimError, match="no pages"):
        list(open_source("jsonl", _write(tmp_path / "empty.jsonl", ["", "  "]), progress=False))
    with pytest.raises(WikiSimError, match="does not exist"):
        open_source("jsonl", tmp_path / "missing.jsonl")
