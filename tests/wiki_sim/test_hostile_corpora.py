"""Hostile JSONL corpora: one-line `file:line` errors, titles never merged, pages bounded in size."""

from __future__ import annotations

import json

import pytest

from tests.wiki_sim.simhelpers import build_jsonl
from websailor.cli import main
from wiki_sim import WikiSim, title_to_url, url_to_title
from wiki_sim.ingest.jsonl import MAX_LINE_BYTES, MAX_PAGE_CHARS


def _one_line_error(capsys, corpus, out) -> str:
    assert main(["wiki", "build", "--source", "jsonl", str(corpus), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


GOOD = json.dumps({"title": "Harbor", "text": "A harbor is where ships dock."}) + "\n"


@pytest.mark.parametrize("line, expected", [
    ('{"title": "Deep", "text": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ('{"title": "Bad \\ud800 title", "text": "some text"}', "lone surrogate"),
    ('{"title": "Null\\u0000byte", "text": "some text"}', "control character"),
    ('{"title": "Bell\\u0007", "text": "some text"}', "control character"),
])
def test_hostile_lines_are_one_line_errors(tmp_path, capsys, line, expected):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(GOOD + line + "\n", encoding="utf-8")
    err = _one_line_error(capsys, corpus, tmp_path / "wiki")
    assert f"{corpus}:2:" in err and expected in err
    assert not (tmp_path / "wiki").exists()


def test_titles_that_differ_only_in_symbols_stay_distinct(tmp_path):
    pages = [("C#", "C sharp is a language designed at Microsoft."),
             ("C", "C is a language designed by Dennis Ritchie at Bell Labs."),
             ("C++", "C plus plus is a language designed by Bjarne Stroustrup."),
             ("Bell Labs", "Bell Labs is a research laboratory where C was designed.")]
    out = build_jsonl(tmp_path, pages)
    with WikiSim(out) as sim:
        assert sim.stats()["pages"] == 4
        for title, text in pages:
            assert sim.page(title)["text"] == text
            assert sim.page(title)["url"] == title_to_url(title)
            assert text in sim.visit(title_to_url(title), "who designed it")
        assert title_to_url("C#").endswith("/wiki/C%23") and url_to_title(title_to_url("C#")) == "C#"
        assert sim.page("Bell Labs#History")["title"] == "Bell Labs"  # a link target's #section still works
        assert url_to_title("https://en.wikipedia.org/wiki/C#History") == "C"


def test_a_50_mb_page_is_skipped_as_it_streams_and_the_peak_is_recorded(tmp_path):
    import resource
    import subprocess
    import sys

    corpus = tmp_path / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(GOOD)
        f.write(json.dumps({"title": "Huge", "text": "word " * (50 * 2 ** 20 // 5)}) + "\n")
        f.write(json.dumps({"title": "Big", "text": "x" * (MAX_PAGE_CHARS + 1)}) + "\n")
        f.write(json.dumps({"title": "Lighthouse", "text": "A lighthouse is a tower that guides ships."}) + "\n")
    assert corpus.stat().st_size > MAX_LINE_BYTES
    out = tmp_path / "wiki"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run([sys.executable, "-m", "websailor.cli", "wiki", "build", "--source", "jsonl", str(corpus),
                          "--out", str(out), "--memory-mb", "1024", "--no-progress"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    info = json.loads((out / "build.json").read_text())
    assert info["counts"]["pages"] == 2
    assert info["source_stats"]["skipped_too_large"] == 2 and info["skipped"]["count"] == 2
    assert any("corpus.jsonl:2: a line of over" in t for t in info["skipped"]["titles"])
    assert any(t.startswith("Big: text of") for t in info["skipped"]["titles"])
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kb < 1024 * 1024 or peak_kb == before  # the build process stayed within --memory-mb
    assert 0 < info["peak_rss_mb"] < 1024
    assert info["peak_rss_mb"] >= info["ingest_peak_rss_mb"]
