"""``--engine auto`` and the engines' size limits: the engine chosen by the corpus's size, a
recommendation for a large Whoosh build, a clear refusal over an engine's limit."""

from __future__ import annotations

import json
import sys

import pytest

from tests.wiki_sim.simhelpers import build_jsonl, write_jsonl
from tests.wiki_sim.test_search import PAGES
from wiki_sim import WikiSim, engines
from wiki_sim.build import build
from wiki_sim.cli import BuildConfig, run_build
from wiki_sim.errors import WikiSimError


def recorded_engine(wiki) -> str:
    return json.loads((wiki / "build.json").read_text())["index"]["engine"]


def test_the_documented_threshold_and_limits():
    assert engines.choose_engine("auto", 10_033) == "whoosh"  # the embedded corpus stays on Whoosh
    assert engines.choose_engine("auto", 1_000_000) == "tantivy"
    assert engines.choose_engine("whoosh", 1_000_000) == "whoosh"
    with pytest.raises(WikiSimError, match=r"21,000,000 pages, over the Whoosh engine's limit of 2,000,000; "
                                           r"build it with --engine tantivy"):
        engines.choose_engine("whoosh", 21_000_000)
    with pytest.raises(WikiSimError, match=r"over the tantivy engine's limit of 2,147,483,647 documents; split"):
        engines.choose_engine("tantivy", 2 ** 31)


def test_auto_builds_whoosh_for_a_small_corpus_and_tantivy_above_the_threshold(tmp_path, monkeypatch):
    small = build_jsonl(tmp_path, PAGES, name="small", engine="auto")
    assert recorded_engine(small) == "whoosh"
    monkeypatch.setattr(engines, "AUTO_TANTIVY_PAGES", len(PAGES) - 1)
    large = build_jsonl(tmp_path, PAGES, name="large", engine="auto")
    assert recorded_engine(large) == "tantivy" and (large / "spelling").is_dir()
    with WikiSim(large, cache_size=0) as sim:
        assert sim.engine_name == "tantivy" and sim.search("Albert Einstein")[0][0].title == "Albert Einstein"


def test_auto_without_tantivy_installed_builds_whoosh(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tantivy", None)
    monkeypatch.setattr(engines, "AUTO_TANTIVY_PAGES", 2)
    assert recorded_engine(build_jsonl(tmp_path, PAGES, engine="auto")) == "whoosh"


def test_a_corpus_over_the_limit_is_refused_and_the_previous_simulator_kept(tmp_path, monkeypatch):
    wiki = build_jsonl(tmp_path, PAGES[:3])
    monkeypatch.setattr(engines, "MAX_PAGES", {"whoosh": 5, "tantivy": 10})
    corpus = write_jsonl(tmp_path / "more.jsonl", PAGES)
    with pytest.raises(WikiSimError, match=rf"the corpus has {len(PAGES)} pages, over the Whoosh engine's limit "
                                           r"of 5; build it with --engine tantivy"):
        build("jsonl", corpus, wiki, progress=False)
    with WikiSim(wiki, cache_size=0) as sim:
        assert sim.stats()["pages"] == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_cli_recommends_tantivy_for_a_large_whoosh_build(tmp_path, monkeypatch, capsys):
    corpus = write_jsonl(tmp_path / "c.jsonl", PAGES)
    monkeypatch.setattr(engines, "AUTO_TANTIVY_PAGES", 5)
    assert run_build(BuildConfig(path=str(corpus), source="jsonl", out=str(tmp_path / "w"), progress=False)) == 0
    err = capsys.readouterr().err
    assert f"note: {len(PAGES)} pages is above 5" in err and "--engine tantivy or --engine auto" in err
    assert run_build(BuildConfig(path=str(corpus), source="jsonl", out=str(tmp_path / "t"), engine="auto",
                                 progress=False)) == 0
    out, err = capsys.readouterr()
    assert "engine tantivy" in out and "note:" not in err
