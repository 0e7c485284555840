"""Any corpus shape: wiki-18, BrowseComp-Plus, KILT and HotpotQA lines build unchanged, with derived links.

The samples are written by the tests from real article text (the default corpus's leads).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wiki_sim import WikiSim
from wiki_sim.build import build
from wiki_sim.errors import WikiSimError
from wiki_sim.ingest import open_source
from wiki_sim.ingest.jsonl import JsonlFields, title_from_text
from wiki_sim.sources import fetch_default_corpus

TITLES = ["Albert Einstein", "Photoelectric effect", "Theory of relativity", "Physics", "Germany", "Max Planck",
          "Quantum mechanics", "Nobel Prize", "Isaac Newton", "Switzerland"]


@pytest.fixture(scope="module")
def articles():
    data = json.loads(fetch_default_corpus().read_text(encoding="utf-8"))
    by_title = {v["title"]: v["extract"] for v in data.values()}
    return [(t, by_title[t]) for t in TITLES]


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _url(i):
    return f"https://physics.example.org/articles/{i}?ref=corpus"


def test_browsecomp_plus_shape_keeps_its_urls(tmp_path, articles):
    rows = [{"docid": str(1000 + i), "url": _url(i), "text": f"---\ntitle: {t}\n---\n{x}" if i % 2 else f"{t}\n{x}"}
            for i, (t, x) in enumerate(articles)]
    out = tmp_path / "bcp"
    info = build("jsonl", _write(tmp_path / "bcp.jsonl", rows), out, progress=False,
                 fields=JsonlFields(id="docid", url="url"))
    assert info["source"]["fields"] == {"url": "url", "id": "docid"}
    assert info["links"]["derived"] is True and info["links"]["count"] > 0
    with WikiSim(out) as sim:
        assert sorted(sim.store.titles()) == sorted(TITLES)
        [hits] = sim.search(["photoelectric effect electrons emitted light"], k=3)
        assert hits[0].title == "Photoelectric effect" and hits[0].url == _url(1)
        assert "electrons" in sim.visit(_url(1), "what is emitted")
        assert "page not found" in sim.visit("https://physics.example.org/articles/99", "x")
        assert {"key": "doc_id", "value": "1001", "source": "corpus_id", "target": None} in sim.facts(
            "Photoelectric effect")
        summary = sim.link_summary()
        assert summary["derived"] and summary["links_resolved"] > 0 and summary["method"] == "entity_links"
        targets = {link.target for link in sim.page_links("Albert Einstein")}
        assert {"Photoelectric effect", "Theory of relativity"} <= targets
        sentence = next(link.sentence for link in sim.page_links("Albert Einstein")
                        if link.target == "Photoelectric effect")
        assert "photoelectric effect" in sentence and len(sentence) < 600


def test_kilt_and_hotpotqa_shapes(tmp_path, articles):
    kilt = [{"_id": str(i), "wikipedia_id": str(700 + i), "wikipedia_title": t,
             "text": [p + "\n" for p in x.split(". ")]} for i, (t, x) in enumerate(articles)]
    pages = list(open_source("jsonl", _write(tmp_path / "kilt.jsonl", kilt), progress=False,
                             fields=JsonlFields(title="wikipedia_title", id="wikipedia_id")))
    assert [p.title for p in pages] == TITLES
    assert "\n\n" in pages[0].text and pages[0].url == ""
    hotpot = [{"title": t, "text": [s + "." for s in x.split(". ")]} for t, x in articles]
    source = open_source("jsonl", _write(tmp_path / "hotpot.jsonl", hotpot), progress=False)
    pages = list(source)
    assert [p.title for p in pages] == TITLES and "\n" not in pages[0].text
    assert source.stats["links"] > 5 and any(t == "Photoelectric effect" for t, _ in pages[0].links)


def test_wiki18_shape_gets_derived_links(tmp_path, articles):
    rows = [{"id": str(i), "contents": f'"{t}"\n{x}'} for i, (t, x) in enumerate(articles)]
    source = open_source("jsonl", _write(tmp_path / "w.jsonl", rows), progress=False)
    pages = {p.title: p for p in source}
    assert source.meta["links"] == {"derived": True, "method": "entity_links"}
    assert dict(pages["Albert Einstein"].links)["Photoelectric effect"] == "photoelectric effect"
    for p in pages.values():
        assert all(p.text[s:s + len(a)] == a for (_, a), s in zip(p.links, p.link_starts))


def test_title_from_text():
    assert title_from_text("---\ntitle: \"A Page\"\nauthor: x\n---\nbody") == "A Page"
    assert title_from_text("\n# Heading one\nbody") == "Heading one"
    assert len(title_from_text("word " * 1000)) <= 200
    assert title_from_text("") == ""


@pytest.mark.parametrize("row, fields, message", [
    ({"doc": "x"}, JsonlFields(text="body"), r'c\.jsonl:1: no field "body" \(--text-field\)'),
    ({"body": "x"}, JsonlFields(title="name", text="body"), r'c\.jsonl:1: no field "name" \(--title-field\)'),
    ({"t": 5, "body": "x"}, JsonlFields(title="t", text="body"), r'c\.jsonl:1: field "t" must be a string'),
    ({"title": "T", "text": {"a": 1}}, JsonlFields(), r'c\.jsonl:1: field "text" must be a string or a list'),
    ({"title": "T", "text": "x", "u": [1]}, JsonlFields(url="u"), r'c\.jsonl:1: field "u" must be a string'),
])
def test_bad_fields_are_one_line_errors(tmp_path, row, fields, message):
    source = open_source("jsonl", _write(tmp_path / "c.jsonl", [row]), progress=False, fields=fields)
    with pytest.raises(WikiSimError, match=message) as err:
        list(source)
    assert "\n" not in str(err.value)


def test_cli_field_options(tmp_path, articles):
    rows = [{"docid": str(i), "link": _url(i), "body": x, "name": t} for i, (t, x) in enumerate(articles[:3])]
    corpus = _write(tmp_path / "c.jsonl", rows)
    out = tmp_path / "wiki"
    cmd = [sys.executable, "-m", "websailor.cli", "wiki", "build", str(corpus), "--source", "jsonl", "--out", str(out),
           "--no-progress", "--title-field", "name", "--text-field", "body", "--url-field", "link", "--id-field",
           "docid"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "links derived from the text" in proc.stdout
    with WikiSim(out) as sim:
        assert sim.page("Albert Einstein")["url"] == _url(0)
    bad_cmd = [("missing" if a == "name" else a) for a in cmd]
    bad = subprocess.run(bad_cmd, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and 'no field "missing"' in bad.stderr
    wrong_kind = subprocess.run([sys.executable, "-m", "websailor.cli", "wiki", "build", "--out", str(tmp_path / "x"),
                                 "--title-field", "name"], capture_output=True, text=True, timeout=300)
    assert wrong_kind.returncode != 0 and "--source jsonl only" in wrong_kind.stderr
